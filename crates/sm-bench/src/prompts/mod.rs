//! Prompts of exact length: the synthetic text (`prompt`), a trace's blocks (`blocks`), a user's `--prompts` file
//! (`prompt_file`), fitting a prompt to its token count (`sizing`) and the local tokenizer
//! (`tokenizer`).

pub mod blocks;
pub(crate) mod prompt;
pub(crate) mod prompt_file;
pub(crate) mod sizing;
pub(crate) mod tokenizer;
