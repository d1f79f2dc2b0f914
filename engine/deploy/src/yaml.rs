//! A YAML document as a small tree whose every node knows where it was written, built
//! from `saphyr-parser`'s events. Only what a deployment file needs: mappings,
//! sequences, scalars with their style and exact source bytes, anchors, aliases and
//! merge keys. The text itself is never re-emitted: a rewrite replaces the bytes of one
//! scalar, so every other byte stays as it was.
//!
//! An alias shares its anchor's node rather than copying it, and a document whose
//! aliases would expand past [`MAX_NODES`] is refused at the alias that crosses it: ten
//! lines of nested aliases (the "billion laughs" shape) otherwise stand for billions of
//! nodes, which any walk of the tree would visit.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle};

/// Where something starts: 1-based line and column, and the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
    pub byte: usize,
}

/// How a scalar was written, for writing another value the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
}

/// Where the bytes of a scalar's value are, or why they cannot be rewritten in place.
pub type Source = std::result::Result<(Range<usize>, Style), String>;

#[derive(Debug, Clone)]
pub enum Node {
    Scalar {
        value: String,
        at: Pos,
        source: Source,
    },
    Seq {
        items: Vec<Node>,
        at: Pos,
    },
    Map {
        pairs: Vec<(Node, Node)>,
        at: Pos,
    },
    /// `*name`: the anchored node (shared, not copied), and where the alias itself was
    /// written.
    Alias {
        target: Arc<Node>,
        anchor: String,
        at: Pos,
    },
}

impl Node {
    pub fn at(&self) -> Pos {
        match self {
            Node::Scalar { at, .. }
            | Node::Seq { at, .. }
            | Node::Map { at, .. }
            | Node::Alias { at, .. } => *at,
        }
    }

    /// The node an alias stands for (itself otherwise).
    pub fn resolved(&self) -> &Node {
        match self {
            Node::Alias { target, .. } => target.resolved(),
            n => n,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self.resolved() {
            Node::Scalar { .. } => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map { .. } => "a mapping",
            Node::Alias { .. } => "an alias",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self.resolved() {
            Node::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// A mapping's pairs, merge keys (`<<: *base`) applied: a key written here wins over
    /// a merged one.
    pub fn entries(&self) -> Option<Vec<(&Node, &Node)>> {
        let Node::Map { pairs, .. } = self.resolved() else {
            return None;
        };
        let mut own: Vec<(&Node, &Node)> = Vec::new();
        let mut merged: Vec<(&Node, &Node)> = Vec::new();
        for (k, v) in pairs {
            if k.as_str() == Some("<<") && !matches!(k.resolved(), Node::Map { .. }) {
                let sources: Vec<&Node> = match v.resolved() {
                    Node::Seq { items, .. } => items.iter().collect(),
                    other => vec![other],
                };
                for s in sources {
                    merged.extend(s.entries().unwrap_or_default());
                }
            } else {
                own.push((k, v));
            }
        }
        for (k, v) in merged {
            if !own.iter().any(|(o, _)| o.as_str() == k.as_str()) {
                own.push((k, v));
            }
        }
        Some(own)
    }
}

/// A parse failure, with where it happened.
#[derive(Debug, Clone)]
pub struct SyntaxError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// How many nodes a document may stand for once every alias is expanded. A deployment
/// file has tens; a file past this is a mistake or an attack, and either way no walk
/// of it should run.
pub const MAX_NODES: u64 = 100_000;

/// How deeply collections may nest. A deployment file nests four or five levels; a
/// limit keeps every recursive walk of the tree (and its drop) off the stack's edge.
pub const MAX_DEPTH: usize = 64;

/// Every document of a YAML stream.
pub fn parse(text: &str) -> std::result::Result<Vec<Node>, SyntaxError> {
    let starts: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    let byte_of = |char_index: usize| starts.get(char_index).copied().unwrap_or(text.len());
    let mut b = Builder {
        text,
        stack: Vec::new(),
        anchors: HashMap::new(),
        docs: Vec::new(),
        seen: 0,
    };
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| SyntaxError {
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: e.info().to_string(),
        })?;
        let at = Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
            byte: byte_of(span.start.index()),
        };
        b.event(ev, at).map_err(|message| SyntaxError {
            line: at.line,
            col: at.col,
            message,
        })?;
    }
    Ok(b.docs)
}

/// A collection being built: its items so far, where it started, its anchor id, and
/// how many nodes it stands for with aliases expanded.
enum Open {
    Seq(Vec<Node>, Pos, usize, u64),
    Map(Vec<(Node, Node)>, Option<Node>, Pos, usize, u64),
}

struct Builder<'t> {
    text: &'t str,
    stack: Vec<Open>,
    /// Each anchor's node and its expanded size.
    anchors: HashMap<usize, (Arc<Node>, u64)>,
    docs: Vec<Node>,
    /// Nodes seen so far, each alias counted as the nodes it stands for.
    seen: u64,
}

impl Builder<'_> {
    /// Counts `n` more nodes, refusing the document once it stands for too many.
    fn count(&mut self, n: u64) -> std::result::Result<(), String> {
        self.seen = self.seen.saturating_add(n);
        match self.seen > MAX_NODES {
            true => Err(format!(
                "the document expands past {MAX_NODES} nodes here (aliases of aliases?); a deployment file needs far fewer"
            )),
            false => Ok(()),
        }
    }

    fn event(&mut self, ev: Event, at: Pos) -> std::result::Result<(), String> {
        match &ev {
            Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) => {
                self.count(1)?
            }
            Event::Alias(id) => self.count(self.anchors.get(id).map_or(0, |(_, n)| *n))?,
            _ => {}
        }
        match ev {
            Event::Scalar(value, style, anchor, _tag) => {
                let source = scalar_source(self.text, at.byte, &value, style);
                let node = Node::Scalar {
                    value: value.into_owned(),
                    at,
                    source,
                };
                self.close(node, anchor, 1)
            }
            Event::Alias(id) => {
                let (target, size) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| "an alias to an anchor that is not defined".to_string())?;
                // The alias's own text, `*name`, names its anchor.
                let anchor = self.text[at.byte..]
                    .strip_prefix('*')
                    .map(|r| {
                        let end = r.find(|c: char| c.is_whitespace() || ",[]{}".contains(c));
                        r[..end.unwrap_or(r.len())].to_string()
                    })
                    .unwrap_or_default();
                self.close(Node::Alias { target, anchor, at }, 0, size)
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                Err(format!(
                    "lists and mappings nest deeper than {MAX_DEPTH} levels here; a deployment file needs a few"
                ))
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Open::Seq(Vec::new(), at, anchor, 1));
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Open::Map(Vec::new(), None, at, anchor, 1));
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Open::Seq(items, at, anchor, size)) => {
                    self.close(Node::Seq { items, at }, anchor, size)
                }
                _ => Err("a list ends that never started".into()),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Open::Map(pairs, None, at, anchor, size)) => {
                    self.close(Node::Map { pairs, at }, anchor, size)
                }
                _ => Err("a mapping ends in the middle of a pair".into()),
            },
            _ => Ok(()),
        }
    }

    /// A finished node, standing for `size` nodes with aliases expanded, goes into what
    /// is open, or becomes a document.
    fn close(&mut self, node: Node, anchor: usize, size: u64) -> std::result::Result<(), String> {
        if let Some(Open::Seq(.., parent) | Open::Map(.., parent)) = self.stack.last_mut() {
            *parent += size;
        }
        if anchor > 0 {
            self.anchors.insert(anchor, (Arc::new(node.clone()), size));
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Open::Seq(items, ..)) => items.push(node),
            Some(Open::Map(pairs, key, ..)) => match key.take() {
                None => *key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
        }
        Ok(())
    }
}

/// The exact bytes of a scalar's value in the text, when it is written on one line in
/// a style that another value can be written in the same way. The parser's span starts
/// at the scalar's properties (`&anchor`, `!tag`); its end is not exact for quoted
/// scalars, so the end is found here.
fn scalar_source(text: &str, start: usize, value: &str, style: ScalarStyle) -> Source {
    let mut pos = start;
    // Properties before the value: `&anchor` and `!tag`, in either order.
    loop {
        let rest = &text[pos..];
        if rest.starts_with('&') || rest.starts_with('!') {
            let end = rest
                .find([' ', '\t'])
                .ok_or("a property with no value after it")?;
            pos += end;
            pos += text[pos..].len() - text[pos..].trim_start_matches([' ', '\t']).len();
        } else {
            break;
        }
    }
    let rest = &text[pos..];
    let one_line = "it is written over more than one line or with escapes; write it as one plain or quoted line";
    match style {
        ScalarStyle::Plain => {
            let ends = rest.get(value.len()..).is_some_and(|after| {
                after.is_empty() || after.starts_with([' ', '\t', '\r', '\n', ',', ']', '}', ':'])
            });
            match rest.starts_with(value) && ends && !value.is_empty() {
                true => Ok((pos..pos + value.len(), Style::Plain)),
                false => Err(one_line.into()),
            }
        }
        ScalarStyle::SingleQuoted => {
            let written = format!("'{}'", value.replace('\'', "''"));
            match rest.starts_with(&written) && !value.contains('\n') {
                true => Ok((pos..pos + written.len(), Style::SingleQuoted)),
                false => Err(one_line.into()),
            }
        }
        ScalarStyle::DoubleQuoted => {
            let written = format!("\"{value}\"");
            let plain = !value.contains(['"', '\\', '\n']);
            match rest.starts_with(&written) && plain {
                true => Ok((pos..pos + written.len(), Style::DoubleQuoted)),
                false => Err(one_line.into()),
            }
        }
        _ => Err("it is a block scalar (`|` or `>`); write it as one plain or quoted line".into()),
    }
}

/// `value` written in `style`, for a value that needs no escaping in any of them.
pub fn write_scalar(value: &str, style: Style) -> String {
    match style {
        Style::Plain => value.to_string(),
        Style::SingleQuoted => format!("'{}'", value.replace('\'', "''")),
        Style::DoubleQuoted => format!("\"{value}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalars(n: &Node, out: &mut Vec<(String, Source)>) {
        match n {
            Node::Scalar { value, source, .. } => out.push((value.clone(), source.clone())),
            Node::Seq { items, .. } => items.iter().for_each(|i| scalars(i, out)),
            Node::Map { pairs, .. } => pairs.iter().for_each(|(k, v)| {
                scalars(k, out);
                scalars(v, out);
            }),
            Node::Alias { .. } => {}
        }
    }

    #[test]
    fn scalar_sources_are_exact_in_every_style() {
        let text = "a: plain # c\r\nb: 'it''s'  # c\nc: \"dq\"   # c\nd: &x !!str tagged\ne: [f, 'g', \"h\"]\nz: ü\n";
        let docs = parse(text).unwrap();
        let mut all = Vec::new();
        scalars(&docs[0], &mut all);
        let got: Vec<(String, String)> = all
            .iter()
            .filter_map(|(v, s)| {
                s.as_ref()
                    .ok()
                    .map(|(r, _)| (v.clone(), text[r.clone()].to_string()))
            })
            .collect();
        let want = [
            ("a", "a"),
            ("plain", "plain"),
            ("b", "b"),
            ("it's", "'it''s'"),
            ("c", "c"),
            ("dq", "\"dq\""),
            ("d", "d"),
            ("tagged", "tagged"),
            ("e", "e"),
            ("f", "f"),
            ("g", "'g'"),
            ("h", "\"h\""),
            ("z", "z"),
            ("ü", "ü"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn block_and_multi_line_scalars_are_not_rewritable() {
        let text = "a: >-\n  folded\nb: \"two\n  lines\"\nc: \"esc\\x41\"\n";
        let docs = parse(text).unwrap();
        let mut all = Vec::new();
        scalars(&docs[0], &mut all);
        let bad: Vec<&str> = all
            .iter()
            .filter(|(_, s)| s.is_err())
            .map(|(v, _)| v.as_str())
            .collect();
        assert_eq!(bad, ["folded", "two lines", "escA"]);
        assert!(
            all.iter()
                .filter(|(v, _)| v.len() == 1)
                .all(|(_, s)| s.is_ok())
        );
    }

    #[test]
    fn aliases_and_merge_keys_resolve_and_name_their_anchor() {
        let text = "base: &b {ref: 'x', path: /p}\nm:\n  - <<: *b\n    path: /q\n  - ref: *r\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.line, 5);
        let text = "v: &w vol:a/b:t\nbase: &b {ref: 'x', path: /p}\nm:\n  - <<: *b\n    path: /q\n  - ref: *w\n";
        let docs = parse(text).unwrap();
        let m = docs[0].entries().unwrap();
        let list = m.iter().find(|(k, _)| k.as_str() == Some("m")).unwrap().1;
        let Node::Seq { items, .. } = list else {
            panic!()
        };
        let first = items[0].entries().unwrap();
        let get = |e: &Vec<(&Node, &Node)>, k: &str| {
            e.iter()
                .find(|(kk, _)| kk.as_str() == Some(k))
                .map(|(_, v)| v.as_str().unwrap().to_string())
        };
        assert_eq!(get(&first, "path").as_deref(), Some("/q"));
        assert_eq!(get(&first, "ref").as_deref(), Some("x"));
        let second = items[1].entries().unwrap();
        let (_, r) = second[0];
        let Node::Alias { anchor, .. } = r else {
            panic!()
        };
        assert_eq!(anchor, "w");
        assert_eq!(r.as_str(), Some("vol:a/b:t"));
    }

    /// Ten of the previous level's alias on each of `levels` lines: 10^levels nodes in
    /// a few hundred bytes.
    fn alias_bomb(levels: usize) -> String {
        let mut text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
        for l in 1..=levels {
            let refs = vec![format!("*a{}", l - 1); 10].join(", ");
            text.push_str(&format!("a{l}: &a{l} [{refs}]\n"));
        }
        text
    }

    #[test]
    fn alias_bombs_are_refused_where_they_cross_the_budget() {
        for levels in [7, 9] {
            let text = alias_bomb(levels);
            assert!(text.len() < 700, "{}", text.len());
            let err = parse(&text).unwrap_err();
            // 10^5 nodes are crossed on the line of the fifth level.
            assert_eq!(err.line, 5, "{err:?}");
            assert!(err.message.contains("expands past 100000 nodes"), "{err:?}");
        }
        // Four levels stand for about 11,000 nodes: allowed, and shared, not copied.
        let docs = parse(&alias_bomb(3)).unwrap();
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn an_anchor_cannot_refer_to_itself() {
        for text in [
            "a: &a {<<: *a}\n",
            "a: &a [*a]\n",
            "sealvol: &s {mounts: [{<<: *s, ref: x, path: /p}]}\n",
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.message.contains("not defined"), "{text}: {err:?}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let err = parse(&deep).unwrap_err();
        assert!(err.message.contains("nest deeper than 64"), "{err:?}");
        // The parser refuses far deeper nesting itself, before any node is built.
        let deeper = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&deeper).is_err());
        let ok = format!("{}{}", "[".repeat(60), "]".repeat(60));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn syntax_errors_say_where() {
        let err = parse("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(err.line >= 2, "{err:?}");
        let err = parse("a: 'open\n").unwrap_err();
        assert_eq!((err.line, err.col), (1, 4), "{err:?}");
    }
}
