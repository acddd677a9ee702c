//! The "ideal prefix cache" of a Mooncake replay: for each request, how much of its prompt an
//! unbounded cache that kept every earlier request's blocks would already hold.
//!
//! A server's prefix cache reuses a block only when every block before it matches too (the KV of a
//! block depends on all the tokens before it), so block `i` counts only if blocks `0..=i` are a
//! prefix of some earlier request; a shared id further in, after a difference, counts for nothing.
//! The figure is a bound on what a real cache (finite, evicting) can reuse, to set beside it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::MooncakeInput;

/// What one request shares with the requests before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SharedPrefix {
    /// Leading blocks that match a prefix of an earlier request.
    pub blocks: usize,
    /// Those blocks in tokens, never more than the request's prompt (its last block may be partial).
    pub tokens: u64,
}

/// Every prefix of every request seen, as a tree of block ids: a prefix is a node, its child by
/// id the prefix one block longer. Exact (no hash of a chain that could collide), and a lookup is
/// one map probe per block.
#[derive(Debug, Clone)]
pub struct PrefixCache {
    block_tokens: u32,
    /// (a prefix, the next block's id) → the longer prefix. The empty prefix is [`ROOT`].
    children: HashMap<(usize, u64), usize>,
}

/// The empty prefix, which every request starts from.
const ROOT: usize = 0;

impl PrefixCache {
    /// An empty cache of blocks of `block_tokens` tokens (the replay's `--replay-block-tokens`).
    pub fn new(block_tokens: u32) -> PrefixCache {
        PrefixCache { block_tokens, children: HashMap::new() }
    }

    /// What `request` shares with the requests admitted before it; then adds its own prefixes.
    pub fn admit(&mut self, request: &MooncakeInput) -> SharedPrefix {
        let mut node = ROOT;
        let mut blocks = 0;
        for &id in &request.hash_ids {
            let fresh = self.children.len() + 1;
            node = match self.children.entry((node, id)) {
                // a known child of a known prefix: once a block differs, the new node has no
                // children, so only a run of matches from the start lands here
                Entry::Occupied(e) => {
                    blocks += 1;
                    *e.get()
                }
                Entry::Vacant(e) => *e.insert(fresh),
            };
        }
        let tokens = (blocks as u64).saturating_mul(u64::from(self.block_tokens)).min(request.input_tokens);
        SharedPrefix { blocks, tokens }
    }
}

/// For each request in order, what it shares with those before it (see [`PrefixCache::admit`]).
pub fn shared_prefixes<'a>(
    requests: impl IntoIterator<Item = &'a MooncakeInput>,
    block_tokens: u32,
) -> Vec<SharedPrefix> {
    let mut cache = PrefixCache::new(block_tokens);
    requests.into_iter().map(|r| cache.admit(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(input_tokens: u64, hash_ids: &[u64]) -> MooncakeInput {
        MooncakeInput { input_tokens, hash_ids: hash_ids.to_vec(), output_tokens: 1 }
    }

    /// The shared tokens of each request, blocks of 10 tokens.
    fn tokens(requests: &[MooncakeInput]) -> Vec<u64> {
        shared_prefixes(requests, 10).iter().map(|s| s.tokens).collect()
    }

    #[test]
    fn no_sharing_shares_nothing() {
        assert_eq!(tokens(&[req(30, &[1, 2, 3]), req(30, &[4, 5, 6]), req(10, &[7])]), vec![0, 0, 0]);
        assert!(shared_prefixes(&[], 10).is_empty());
    }

    #[test]
    fn a_repeated_request_shares_all_of_it() {
        assert_eq!(tokens(&[req(30, &[1, 2, 3]), req(30, &[1, 2, 3]), req(30, &[1, 2, 3])]), vec![0, 30, 30]);
        let s = shared_prefixes(&[req(30, &[1, 2, 3]), req(30, &[1, 2, 3])], 10);
        assert_eq!(s[1], SharedPrefix { blocks: 3, tokens: 30 });
    }

    #[test]
    fn sharing_stops_where_the_prompts_diverge() {
        // the third request matches the second's first two blocks, then differs, then meets id 4 again
        let r = [req(40, &[1, 2, 3, 4]), req(40, &[1, 2, 9, 4]), req(50, &[1, 2, 9, 5, 4])];
        assert_eq!(tokens(&r), vec![0, 20, 30]);
    }

    #[test]
    fn a_shared_id_out_of_the_prefix_counts_for_nothing() {
        // id 2 and 3 are known, but not after 7: a cache cannot reuse them
        assert_eq!(tokens(&[req(30, &[1, 2, 3]), req(30, &[7, 2, 3])]), vec![0, 0]);
        // a known block at the same position after a different first block
        assert_eq!(tokens(&[req(20, &[1, 2]), req(20, &[3, 2])]), vec![0, 0]);
    }

    #[test]
    fn the_best_of_several_earlier_requests_counts() {
        let r = [req(20, &[1, 2]), req(40, &[1, 5, 6, 7]), req(40, &[1, 5, 6, 8])];
        assert_eq!(tokens(&r), vec![0, 10, 30]);
        // a longer earlier request covers a shorter later one whole
        assert_eq!(tokens(&[req(40, &[1, 2, 3, 4]), req(20, &[1, 2])]), vec![0, 20]);
    }

    #[test]
    fn a_partial_last_block_counts_only_its_tokens() {
        // 25 tokens in blocks of 10: the third block holds 5
        assert_eq!(tokens(&[req(25, &[1, 2, 3]), req(25, &[1, 2, 3])]), vec![0, 25]);
        // sharing two full blocks of a longer request
        assert_eq!(tokens(&[req(30, &[1, 2, 3]), req(21, &[1, 2, 4])]), vec![0, 20]);
    }

    #[test]
    fn the_cache_admits_one_request_at_a_time() {
        let mut c = PrefixCache::new(512);
        assert_eq!(c.admit(&req(1000, &[1, 2])), SharedPrefix::default());
        assert_eq!(c.admit(&req(600, &[1, 3])), SharedPrefix { blocks: 1, tokens: 512 });
        assert_eq!(c.admit(&req(600, &[1, 3])), SharedPrefix { blocks: 2, tokens: 600 });
    }
}
