//! KV blocks and the prefix cache, vLLM style: full prompt blocks are identified by a chained hash of
//! their tokens; blocks no request holds stay cached until evicted least-recently-freed first.

use std::collections::{BTreeSet, HashMap};

struct CachedBlock {
    refs: u32,
    freed_at: u64,
}

pub(crate) struct KvCache {
    total: u64,
    /// Private blocks plus cached blocks some request holds.
    in_use: u64,
    blocks: HashMap<u64, CachedBlock>,
    /// Cached blocks nobody holds, by the order they were released: reusable until evicted.
    evictable: BTreeSet<(u64, u64)>,
    clock: u64,
}

impl KvCache {
    pub(crate) fn new(total: u64) -> Self {
        Self { total, in_use: 0, blocks: HashMap::new(), evictable: BTreeSet::new(), clock: 0 }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn in_use(&self) -> u64 {
        self.in_use
    }

    /// Blocks that can be handed out (free or evictable).
    pub(crate) fn available(&self) -> u64 {
        self.total - self.in_use
    }

    /// Length of the cached prefix of `hashes` (at most `max` blocks) and how many of those blocks are
    /// currently unheld (taking them reduces `available`).
    pub(crate) fn lookup(&self, hashes: &[u64], max: usize) -> (usize, u64) {
        let mut unheld = 0;
        let mut n = 0;
        for h in hashes.iter().take(max) {
            match self.blocks.get(h) {
                Some(b) => {
                    if b.refs == 0 {
                        unheld += 1;
                    }
                    n += 1;
                }
                None => break,
            }
        }
        (n, unheld)
    }

    pub(crate) fn acquire(&mut self, hashes: &[u64]) {
        for h in hashes {
            let b = self.blocks.get_mut(h).expect("acquire follows lookup");
            if b.refs == 0 {
                self.evictable.remove(&(b.freed_at, *h));
                self.in_use += 1;
            }
            b.refs += 1;
        }
    }

    pub(crate) fn release(&mut self, hashes: &[u64]) {
        for h in hashes {
            if let Some(b) = self.blocks.get_mut(h) {
                b.refs -= 1;
                if b.refs == 0 {
                    self.clock += 1;
                    b.freed_at = self.clock;
                    self.evictable.insert((self.clock, *h));
                    self.in_use -= 1;
                }
            }
        }
    }

    /// Takes `n` private blocks, evicting unheld cached blocks when no clean block is left.
    pub(crate) fn alloc(&mut self, n: u64) -> bool {
        if self.available() < n {
            return false;
        }
        while self.total - self.in_use - (self.evictable.len() as u64) < n {
            let (_, h) = self.evictable.pop_first().expect("available covers it");
            self.blocks.remove(&h);
        }
        self.in_use += n;
        true
    }

    pub(crate) fn free(&mut self, n: u64) {
        self.in_use -= n;
    }

    /// A private block now holds the full prompt block `hash`: publish it in the prefix cache (held by
    /// its owner). False when another request already published the same block.
    pub(crate) fn publish(&mut self, hash: u64) -> bool {
        if self.blocks.contains_key(&hash) {
            return false;
        }
        self.blocks.insert(hash, CachedBlock { refs: 1, freed_at: 0 });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_blocks_survive_until_evicted() {
        let mut kv = KvCache::new(4);
        assert!(kv.alloc(2));
        assert!(kv.publish(10) && kv.publish(11));
        assert_eq!(kv.in_use(), 2);
        kv.release(&[10, 11]);
        assert_eq!(kv.in_use(), 0);
        assert_eq!(kv.lookup(&[10, 11, 12], 8), (2, 2));
        // two clean blocks left: allocating three evicts the oldest released block (10)
        assert!(kv.alloc(3));
        assert_eq!(kv.lookup(&[10, 11], 8), (0, 0));
        assert_eq!(kv.lookup(&[11], 8), (1, 1));
        assert!(!kv.alloc(2));
        kv.acquire(&[11]);
        assert_eq!(kv.in_use(), 4);
        assert!(!kv.alloc(1));
    }
}
