//! Prompts of exact length (methodology §4).
//!
//! Every request of one context sends the same chat (so the prefix cache works):
//! a document of natural filler text, the assistant's acknowledgement, and a
//! question. A unique tag at the very start keeps contexts, runs, warm-ups and
//! calibration probes from sharing a prefix.

use sm_client::openai::Prompt;

const FILLER: &[&str] = &[
    "The history of measurement is a history of agreeing on what a number means.",
    "Merchants in ancient markets compared weights against stones kept by the temple.",
    "A surveyor walks the boundary twice and trusts neither walk until they agree.",
    "Rivers flood in spring, and the farmers who marked the high water planted above it.",
    "Every clock drifts, so sailors carried several and believed the majority.",
    "The library kept two copies of each ledger in separate buildings across the square.",
    "Bridges were tested by driving loaded carts across them before the ribbon was cut.",
    "An honest scale is checked in the morning and again when the market closes.",
    "Astronomers recorded each observation with the time, the place and the instrument.",
    "When two measurements disagree, the careful engineer measures a third time.",
    "The baker weighs flour by the gram because a cup holds a different amount each day.",
    "Railway timetables forced towns to agree on a single time for the whole country.",
    "A map is only as good as the triangles that were measured to draw it.",
    "Doctors count a pulse for a full minute when the rhythm is irregular.",
    "Engineers write down the conditions of a test so that others can repeat it.",
    "The harbour master logs every ship that enters, with its tonnage and its cargo.",
    "Old thermometers were filled with coloured spirit and marked by hand.",
    "A good experiment changes one thing at a time and keeps everything else still.",
    "The weather station records the same readings at the same hours every day.",
    "Numbers that cannot be checked are opinions written in a tidy font.",
];

const ACK: &str = "I have read the entire reference document. Please ask your question.";
const QUESTION: &str = "Write an extremely detailed, comprehensive encyclopedia article about the complete history of \
measurement, from the first standard weights to modern atomic clocks. Cover every period, every region and every \
instrument in depth, with dates, names and examples. Do not summarize; provide maximum detail on every topic.";

/// Filler text of at least `chars` characters (cut at a character boundary).
pub fn filler(chars: usize) -> String {
    let mut out = String::with_capacity(chars + 128);
    let mut i = 0;
    while out.len() < chars {
        out.push_str(FILLER[i % FILLER.len()]);
        out.push(' ');
        i += 1;
    }
    out.truncate(chars);
    // `chars` may fall inside nothing but ASCII, so truncation is always at a boundary.
    out
}

/// The chat for a document of `doc_chars` filler characters after `tag`.
pub fn build(tag: &str, doc_chars: usize) -> Prompt {
    build_inviting(tag, doc_chars, None)
}

/// [`build`], its question followed by `invite` (with `--tools`, the sentence that asks for a
/// call: part of the prompt, so sized with it).
pub fn build_inviting(tag: &str, doc_chars: usize, invite: Option<&str>) -> Prompt {
    let doc = format!(
        "{tag} Below is a large reference document. Read it carefully, then answer the question that follows.\n\n\
--- BEGIN REFERENCE DOCUMENT ---\n{}\n--- END REFERENCE DOCUMENT ---",
        filler(doc_chars)
    );
    Prompt {
        messages: vec![
            ("user".to_string(), doc),
            ("assistant".to_string(), ACK.to_string()),
            ("user".to_string(), invite.map_or_else(|| QUESTION.to_string(), |i| format!("{QUESTION} {i}"))),
        ],
    }
}

/// A short prompt for the JIT warm-up request.
pub fn warmup_prompt(tag: &str) -> Prompt {
    Prompt { messages: vec![("user".to_string(), format!("{tag} Count from 1 to 20."))] }
}

/// Tags of one run: fixed width so that every tag has the same length, whatever
/// the context or purpose.
pub fn tag(run_id: &str, purpose: char, ctx: u64) -> String {
    format!("[sm {run_id} {purpose}{ctx:010}]")
}

/// The tag of a prefill row measured in a later session of a run (`--resume`): the context's
/// measured prompt may have been sent already, and its prefix cached, so the row gets a prompt of
/// its own, new in every session (`salt`), that shares no prefix with anything sent before.
pub fn remeasure_tag(run_id: &str, salt: &str, ctx: u64) -> String {
    format!("[sm {run_id} {REMEASURE}{salt}{ctx:010}]")
}

/// The tag of a fresh prompt of the mixed-prefill phase (methodology §13.3): its own per session
/// (`salt`), level and probe (`index`), so that no probe shares a prefix with anything sent before.
pub fn mixed_tag(run_id: &str, salt: &str, index: u32, ctx: u64) -> String {
    format!("[sm {run_id} {MIXED}{salt}{index:04}{ctx:010}]")
}

/// Tag purposes.
pub const MIXED: char = 'x';
pub const MEASURED: char = 'm';
pub const REMEASURE: char = 'p';
pub const WARMUP: char = 'w';
pub const CALIBRATION: char = 'c';
/// The system prompts of the sessions phase.
pub const SESSION: char = 's';

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_has_the_exact_length() {
        for n in [0, 1, 77, 5000] {
            assert_eq!(filler(n).len(), n);
        }
    }

    #[test]
    fn tags_differ_at_the_start_and_have_one_width() {
        let a = tag("abcdefgh", MEASURED, 8192);
        let b = tag("abcdefgh", WARMUP, 262_144);
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b);
        let p = build(&a, 100);
        assert!(p.messages[0].1.starts_with(&a));
        assert_eq!(p.messages.len(), 3);
        let again = remeasure_tag("abcdefgh", "qwertyui", 8192);
        assert_eq!(again, "[sm abcdefgh pqwertyui0000008192]");
        assert_ne!(again[..14], a[..14], "a re-measure shares no more than `[sm RUNID ` with the measured prompt");
        let fresh = mixed_tag("abcdefgh", "qwertyui", 3, 8192);
        assert_eq!(fresh, "[sm abcdefgh xqwertyui00030000008192]");
        assert_ne!(fresh[..14], a[..14]);
        assert_ne!(fresh, mixed_tag("abcdefgh", "qwertyui", 4, 8192));
    }
}
