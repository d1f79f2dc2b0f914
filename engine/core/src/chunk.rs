//! Content-defined chunking: FastCDC (2020) cut points over large read buffers.
//!
//! Chunking a big buffer is ≈30% faster than `StreamCDC`, so files are read in blocks
//! of `BLOCK` bytes and cut in place. A cut decision looks at most `max` bytes ahead, so
//! whenever less than `max` bytes remain and the file has more, the tail is carried into
//! the next block: the cut points are exactly those of chunking the whole file at once.

use std::io::{self, Read};

use fastcdc::v2020::{Normalization, cut, select_masks};
use serde::{Deserialize, Serialize};

/// How much of a file one pipeline block carries. Large enough that per-block overhead
/// vanishes, small enough that a few in flight stay well inside the memory budget.
pub const BLOCK: usize = 16 << 20;

/// Chunk size bounds, fixed per repository in `sealvol.repo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkParams {
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

impl ChunkParams {
    /// Chosen by measurement on the 2 GiB checkpoint series (docs/CHUNKING.md): a
    /// 128 KiB average stores an inserted tensor for 0.8 MB (256 KiB: 1.9 MB, too close
    /// to the 2 MB budget) at the same push speed, with metadata at 0.03% of the data.
    pub const DEFAULT: ChunkParams = ChunkParams {
        min: 32 << 10,
        avg: 128 << 10,
        max: 512 << 10,
    };

    pub fn is_valid(&self) -> bool {
        use fastcdc::v2020::{AVERAGE_MAX, AVERAGE_MIN, MAXIMUM_MAX, MINIMUM_MIN};
        self.min as usize >= MINIMUM_MIN
            && self.min < self.avg
            && self.avg < self.max
            && (self.avg as usize) >= AVERAGE_MIN
            && (self.avg as usize) <= AVERAGE_MAX
            && (self.max as usize) <= MAXIMUM_MAX
            && (self.max as usize) <= BLOCK / 2
            && self.min.is_multiple_of(2)
            && self.avg.is_multiple_of(2)
            && self.max.is_multiple_of(2)
    }
}

/// Cuts `data` into chunks; `at_end` says whether the file ends with `data`. Returns
/// chunk lengths and how many bytes were consumed (the rest must be carried over).
pub struct Cutter {
    params: ChunkParams,
    masks: (u64, u64),
}

impl Cutter {
    pub fn new(params: ChunkParams) -> Cutter {
        Cutter {
            params,
            masks: select_masks(params.avg as usize, Normalization::Level1),
        }
    }

    pub fn cut(&self, data: &[u8], at_end: bool, lens: &mut Vec<u32>) -> usize {
        let p = &self.params;
        let (ms, ml) = self.masks;
        let mut pos = 0;
        while pos < data.len() {
            let rest = &data[pos..];
            if !at_end && rest.len() < p.max as usize {
                break;
            }
            let (_, n) = cut(
                rest,
                p.min as usize,
                p.avg as usize,
                p.max as usize,
                ms,
                ml,
                ms << 1,
                ml << 1,
            );
            lens.push(n as u32);
            pos += n;
        }
        pos
    }
}

/// One block of a file: its bytes and the chunks they split into.
pub struct Block {
    pub data: Vec<u8>,
    pub lens: Vec<u32>,
    /// True for the last block of the file (possibly empty, for a zero-byte file).
    pub last: bool,
}

/// Reads a file as a sequence of chunked blocks.
pub struct BlockReader<R> {
    reader: R,
    cutter: Cutter,
    carry: Vec<u8>,
    done: bool,
}

impl<R: Read> BlockReader<R> {
    pub fn new(reader: R, params: ChunkParams) -> Self {
        BlockReader {
            reader,
            cutter: Cutter::new(params),
            carry: Vec::new(),
            done: false,
        }
    }

    /// Capacity a block buffer needs: a full read plus the largest possible carry.
    pub fn buffer_capacity(&self) -> usize {
        BLOCK + self.cutter.params.max as usize
    }

    /// The next block, read into `data` (a recycled buffer: reusing memory avoids a
    /// page fault per 4 KiB, which costs more than the copy on small VMs), or `None`
    /// after the last one.
    pub fn next_block(&mut self, mut data: Vec<u8>) -> io::Result<Option<Block>> {
        if self.done {
            return Ok(None);
        }
        // Reads go into the initialised bytes of the buffer, which keeps its length
        // between blocks: `read_to_end` would zero its 16 MiB of spare capacity again
        // for every block (3% of a sync's time). The initialised part grows by doubling,
        // so a small file pays for zeroing no more than it reads.
        let carried = self.carry.len();
        let want = carried + BLOCK;
        if data.len() < carried {
            data.resize(carried, 0);
        }
        data[..carried].copy_from_slice(&self.carry);
        self.carry.clear();
        let mut filled = carried;
        let mut at_end = false;
        while filled < want {
            if filled == data.len() {
                data.resize(want.min((2 * filled).max(filled + (64 << 10))), 0);
            }
            let end = data.len().min(want);
            match self.reader.read(&mut data[filled..end]) {
                Ok(0) => {
                    at_end = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        data.truncate(filled);
        let mut lens = Vec::with_capacity(BLOCK / self.cutter.params.avg as usize * 2);
        let used = self.cutter.cut(&data, at_end, &mut lens);
        self.carry.extend_from_slice(&data[used..]);
        data.truncate(used);
        self.done = at_end;
        Ok(Some(Block {
            data,
            lens,
            last: at_end,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cut_exactly_like_the_whole_file() {
        let data = crate::testutil::noise(BLOCK * 2 + 12345, 7);
        let mut whole = Vec::new();
        let consumed = Cutter::new(ChunkParams::DEFAULT).cut(&data, true, &mut whole);
        assert_eq!(consumed, data.len());

        let mut r = BlockReader::new(&data[..], ChunkParams::DEFAULT);
        let mut lens = Vec::new();
        let mut bytes = Vec::new();
        while let Some(b) = r.next_block(Vec::new()).unwrap() {
            assert_eq!(
                b.lens.iter().map(|&l| l as usize).sum::<usize>(),
                b.data.len()
            );
            lens.extend(b.lens);
            bytes.extend(b.data);
            if b.last {
                break;
            }
        }
        assert_eq!(lens, whole);
        assert_eq!(bytes, data);
        let p = ChunkParams::DEFAULT;
        assert!(
            lens[..lens.len() - 1]
                .iter()
                .all(|&l| l >= p.min && l <= p.max)
        );
    }

    #[test]
    fn recycled_buffers_with_stale_bytes_read_each_file_exactly() {
        // Buffers come back from the pipeline still holding an earlier file's bytes:
        // what a block carries must be only this file's.
        let big = crate::testutil::noise(BLOCK + 700_000, 3);
        let small = crate::testutil::noise(90_000, 4);
        let mut spare: Vec<Vec<u8>> = Vec::new();
        for data in [&big, &small, &big, &small] {
            let mut whole = Vec::new();
            Cutter::new(ChunkParams::DEFAULT).cut(data, true, &mut whole);
            let mut r = BlockReader::new(&data[..], ChunkParams::DEFAULT);
            let (mut lens, mut bytes, mut used) = (Vec::<u32>::new(), Vec::new(), Vec::new());
            while let Some(b) = r.next_block(spare.pop().unwrap_or_default()).unwrap() {
                lens.extend(&b.lens);
                bytes.extend_from_slice(&b.data);
                used.push(b.data);
            }
            assert_eq!(lens, whole);
            assert_eq!(&bytes, data);
            spare.extend(used);
        }
    }

    #[test]
    fn empty_file_is_one_empty_last_block() {
        let mut r = BlockReader::new(&[][..], ChunkParams::DEFAULT);
        let b = r.next_block(Vec::new()).unwrap().unwrap();
        assert!(b.last && b.data.is_empty() && b.lens.is_empty());
        assert!(r.next_block(Vec::new()).unwrap().is_none());
    }

    #[test]
    fn default_params_are_valid() {
        assert!(ChunkParams::DEFAULT.is_valid());
    }
}
