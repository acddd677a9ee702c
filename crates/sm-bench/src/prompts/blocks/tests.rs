use std::collections::HashSet;

use super::*;

/// A tokenizer that counts a template of 7 tokens and one per space-separated word, except the
/// words in `long` (two tokens each) and a word right after itself in `merging` (none: it merges).
fn counter(
    long: &'static [&'static str],
    merging: &'static [&'static str],
) -> impl AsyncFn(&str) -> Result<u64, String> {
    async move |text: &str| {
        let mut n = 7;
        let mut last = "";
        for w in text.split(' ') {
            n += if long.contains(&w) {
                2
            } else if merging.contains(&w) && last == w {
                0
            } else {
                1
            };
            last = w;
        }
        Ok(n)
    }
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn calibration_keeps_the_words_that_are_one_token_each() {
    assert_eq!(run(Vocabulary::calibrate(counter(&[], &[]))), Ok(Vocabulary::all()));
    let v = run(Vocabulary::calibrate(counter(&["the", "and", "dog"], &["of", "sea"]))).unwrap();
    assert_eq!(v.words.len(), CANDIDATES.len() - 5);
    for w in ["the", "and", "dog", "of", "sea"] {
        assert!(!v.words.contains(&w), "{w} is kept");
    }
    assert!(v.words.contains(&"for") && v.words.contains(&"us"));
}

#[test]
fn calibration_says_why_it_cannot_make_a_vocabulary() {
    // a tokenizer that counts every word as two
    let all: &'static [&'static str] = CANDIDATES;
    let e = run(Vocabulary::calibrate(counter(all, &[]))).unwrap_err();
    assert_eq!(e, VocabularyError::TooFew { found: 0 });
    assert!(e.to_string().contains("--replay-format messages"), "{e}");
    let failing = async |_: &str| -> Result<u64, String> { Err("the server stopped counting tokens".into()) };
    let e = run(Vocabulary::calibrate(failing)).unwrap_err();
    assert_eq!(e, VocabularyError::Count("the server stopped counting tokens".into()));
    assert!(Vocabulary::of(CANDIDATES[..MIN_WORDS - 1].to_vec()).is_err());
    assert!(Vocabulary::of(CANDIDATES[..MIN_WORDS].to_vec()).is_ok());
}

/// Tokens of a content after the lead, on the simulated engine's tokenizer.
fn sim_tokens(content: &str) -> u64 {
    (sm_sim::tokenizer::count(content) - sm_sim::tokenizer::count(LEAD)) as u64
}

#[test]
fn a_prompt_is_exactly_its_tokens_long_with_a_partial_last_block() {
    let v = Vocabulary::all();
    for (ids, block, tokens) in
        [(&[1u64][..], 512, 512), (&[1, 2, 3], 512, 1200), (&[7, 7], 16, 17), (&[9], 4, 1), (&[4, 5], 512, 0)]
    {
        let c = v.content(ids, block, tokens).unwrap();
        assert!(c.starts_with(LEAD), "{c}");
        assert_eq!(sim_tokens(&c), tokens, "{ids:?} × {block}, {tokens} tokens");
        assert_eq!(c.split(' ').count() as u64 - 1, tokens, "one word a token");
    }
    // ids that do not cover the length
    assert_eq!(v.content(&[1, 2], 512, 1025), None);
    assert_eq!(v.content(&[], 512, 1), None);
}

#[test]
fn shared_ids_share_exactly_their_blocks() {
    let v = Vocabulary::all();
    let words = |ids: &[u64]| -> Vec<String> {
        v.content(ids, 64, ids.len() as u64 * 64).unwrap().split(' ').map(str::to_string).collect()
    };
    let (a, b) = (words(&[10, 11, 12]), words(&[10, 11, 99]));
    // the lead and the first two blocks are the same text, word for word
    assert_eq!(a[..1 + 128], b[..1 + 128]);
    assert_ne!(a[1 + 128..], b[1 + 128..]);
    // the same id later in another prompt is the same block: the text is by id, not by place
    let c = words(&[99, 10]);
    assert_eq!(c[1 + 64..], a[1..1 + 64]);
}

#[test]
fn different_ids_give_different_blocks_from_their_first_words() {
    let v = Vocabulary::all();
    let mut firsts = HashSet::new();
    for id in 0..2000u64 {
        let mut s = String::new();
        v.push_block(id, 6, &mut s);
        firsts.insert(s);
    }
    // 100 words to the sixth power: two of 2,000 ids beginning alike would be a broken generator
    assert_eq!(firsts.len(), 2000);
}

#[test]
fn a_lead_takes_its_tokens_from_the_first_block() {
    let v = Vocabulary::all();
    let words = |c: &str| c.split(' ').count() as u64 - 1;
    // 10 tokens before the words: the first block of 64 keeps 54 words, the rest are whole
    let a = v.content_at(&[1, 2, 3], 64, 10, 192).unwrap();
    assert_eq!(words(&a), 182);
    // a prompt that shares the first two blocks shares their words exactly, then differs
    let b = v.content_at(&[1, 2, 9], 64, 10, 150).unwrap();
    let shared = a.split(' ').zip(b.split(' ')).take_while(|(x, y)| x == y).count() as u64 - 1;
    assert!(shared >= 54 + 64, "{shared}");
    assert_eq!(&a[..LEAD.len()], LEAD);
    assert_eq!(v.content_at(&[1], 64, 0, 64), v.content(&[1], 64, 64));
    // a lead longer than a block skips into the next
    assert_eq!(words(&v.content_at(&[1, 2], 64, 70, 128).unwrap()), 58);
    assert_eq!(v.content_at(&[1], 64, 10, 65), None);
}
