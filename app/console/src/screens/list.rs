//! What every list screen keeps of its list: the rows, the ones the `/` filter shows,
//! and the selection among those (an index into the rows shown, which the app moves
//! with the keys and the mouse and keeps below `len`).

/// Whether `hay` passes `filter` (case-insensitive; an empty filter passes all).
pub fn matches(filter: &str, hay: &str) -> bool {
    filter.is_empty() || hay.to_lowercase().contains(&filter.to_lowercase())
}

/// The indexes of `rows` whose text passes `filter`, in order. With no filter no row's
/// text is made: 10,000 versions are drawn every frame.
pub fn shown<T>(rows: &[T], filter: &str, text: impl Fn(&T) -> String) -> Vec<usize> {
    if filter.is_empty() {
        return (0..rows.len()).collect();
    }
    (0..rows.len())
        .filter(|&i| matches(filter, &text(&rows[i])))
        .collect()
}

/// The index into the rows of the row selected among those shown, if any.
pub fn pick(shown: &[usize], selected: usize) -> Option<usize> {
    shown.get(selected).copied()
}

/// A screen's list: its rows, the text the filter matches each by, and the selection.
pub struct List<T> {
    rows: Vec<T>,
    text: fn(&T) -> String,
    /// The selected row, as an index among the rows shown.
    pub sel: usize,
}

impl<T> List<T> {
    pub fn new(text: fn(&T) -> String) -> List<T> {
        List {
            rows: Vec::new(),
            text,
            sel: 0,
        }
    }

    pub fn rows(&self) -> &[T] {
        &self.rows
    }

    /// New rows from a load; the selection stays where it was (the app keeps it in
    /// bounds).
    pub fn set_rows(&mut self, rows: Vec<T>) {
        self.rows = rows;
    }

    pub fn shown(&self, filter: &str) -> Vec<usize> {
        shown(&self.rows, filter, self.text)
    }

    pub fn len(&self, filter: &str) -> usize {
        match filter.is_empty() {
            true => self.rows.len(),
            false => self.shown(filter).len(),
        }
    }

    pub fn selected(&self, filter: &str) -> Option<&T> {
        self.rows.get(pick(&self.shown(filter), self.sel)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selection_is_among_the_rows_the_filter_shows() {
        let mut l = List::new(|s: &&str| s.to_string());
        l.set_rows(vec!["alpha", "beta", "gamma", "Alphabet"]);
        assert_eq!(l.len(""), 4);
        assert_eq!(l.shown("ALPHA"), vec![0, 3]);
        assert_eq!(l.len("alpha"), 2);
        l.sel = 1;
        assert_eq!(l.selected(""), Some(&"beta"));
        assert_eq!(l.selected("alpha"), Some(&"Alphabet"));
        l.sel = 2;
        assert_eq!(l.selected("alpha"), None);
        assert!(l.shown("zeta").is_empty());
    }
}
