//! "Did you mean …?": the name a user most likely meant, among those that exist. A
//! misspelt volume or tag is answered the same way by every command that takes a ref.

/// The name in `known` closest to `typed`: one a few edits away (a quarter of its
/// length, at least one), or one that starts with what was typed (`weights/tiny` for
/// `weights/tiny-llama`). Case is ignored; ties go to the first in `known`.
pub fn nearest<'a>(typed: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typed_lower = typed.to_lowercase();
    let budget = (typed.chars().count() / 4).max(1);
    let mut best: Option<(usize, &str)> = None;
    for name in known {
        let lower = name.to_lowercase();
        if lower == typed_lower && name != typed {
            return Some(name);
        }
        let edits = strsim::damerau_levenshtein(&typed_lower, &lower);
        // A prefix counts as one edit: closer than a typo of two letters.
        let score = match lower.starts_with(&typed_lower) && lower != typed_lower {
            true => 1.min(edits),
            false => edits,
        };
        let near = score <= budget || lower.starts_with(&typed_lower);
        if near && name != typed && best.is_none_or(|(s, _)| score < s) {
            best = Some((score, name));
        }
    }
    best.map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn a_typo_a_prefix_and_a_case_slip_find_their_name() {
        let known = [
            "adapters/support-lora",
            "tokenizers/bpe-32k",
            "weights/tiny",
            "weights/tiny-llama",
        ];
        assert_eq!(nearest("weights/tinny", known), Some("weights/tiny"));
        assert_eq!(
            nearest("weight/tiny-llama", known),
            Some("weights/tiny-llama")
        );
        assert_eq!(
            nearest("weights/tiny-ll", known),
            Some("weights/tiny-llama")
        );
        assert_eq!(nearest("Weights/Tiny", known), Some("weights/tiny"));
        assert_eq!(
            nearest("adapters/suport-lora", known),
            Some("adapters/support-lora")
        );
        assert_eq!(nearest("prdo", ["canary", "prod"]), Some("prod"));
    }

    #[test]
    fn nothing_near_is_no_suggestion() {
        let known = ["weights/tiny", "tokenizers/bpe-32k"];
        assert_eq!(nearest("datasets/evals", known), None);
        assert_eq!(nearest("x", ["prod", "canary"]), None);
        assert_eq!(
            nearest("weights/tiny", known),
            None,
            "itself is no suggestion"
        );
        assert_eq!(nearest("anything", []), None);
    }
}
