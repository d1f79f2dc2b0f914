//! Verify: a survey of every object the repository holds (its format file, packs and
//! their trailers, index objects, damage records, chunk lists, manifests, tags), then a
//! report that names each damaged object and exactly which versions, files and tags it
//! breaks, no more and no less, and the commands that fix it. `repair` acts on the same
//! survey.
//!
//! A chunk list is checked entry by entry against its packs' tables, and a chunk copy
//! against its hash when its pack is read (`ReadData`). A file is broken when a chunk
//! copy its list names cannot be used; other copies of the chunk do not save it (a
//! reader follows its list), but `repair` relinks it to one.

mod packs;
mod read_data;
mod report;
mod survey;

pub use packs::PackFacts;
pub use read_data::{ReadData, SAMPLE_MIN};
pub use report::{Affected, Fix, Problem, VerifyReport};
pub use survey::{IndexFacts, Survey, TagFacts, survey_all, survey_version};
