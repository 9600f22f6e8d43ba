//! Length groups for a training batch: the batch's texts, sorted by length,
//! cut into consecutive groups run as separate forward passes, so that a
//! short text is padded to its group's longest rather than to the batch's.
//! Padding is masked, so the embeddings are the same numbers either way;
//! only the work changes (on enhi's pairs one padded batch of 32 holds about
//! four times the tokens it needs).

use std::ops::Range;

/// Cuts lengths sorted ascending into consecutive groups that minimise the
/// padded token slots (each group's size times its longest) plus `overhead`
/// slots charged per group (the fixed cost of one more forward pass). An
/// `overhead` of `usize::MAX` keeps one group; no lengths give no groups.
pub fn length_groups(sorted: &[usize], overhead: usize) -> Vec<Range<usize>> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    // best[j]: the least cost of the first j lengths; from[j]: where the
    // last group of that cover starts
    let mut best = vec![u128::MAX; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0;
    for j in 1..=n {
        for i in 0..j {
            let cost = best[i] + ((j - i) * sorted[j - 1]) as u128 + overhead as u128;
            if cost < best[j] {
                best[j] = cost;
                from[j] = i;
            }
        }
    }
    let mut out = Vec::new();
    let mut j = n;
    while j > 0 {
        out.push(from[j]..j);
        j = from[j];
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(sorted: &[usize], groups: &[Range<usize>]) -> usize {
        groups.iter().map(|g| g.len() * sorted[g.end - 1]).sum()
    }

    #[test]
    fn groups_cover_the_batch_in_order() {
        let lens = [3, 3, 4, 9, 10, 10, 40, 128];
        for overhead in [0, 8, 32, 1000, usize::MAX] {
            let g = length_groups(&lens, overhead);
            assert_eq!(g.first().unwrap().start, 0);
            assert_eq!(g.last().unwrap().end, lens.len());
            assert!(g.windows(2).all(|w| w[0].end == w[1].start));
            assert!(g.iter().all(|r| !r.is_empty()));
        }
        assert!(length_groups(&[], 5).is_empty());
    }

    #[test]
    fn overhead_trades_padding_against_passes() {
        let lens = [3, 3, 4, 9, 10, 10, 40, 128];
        // free passes: one group per distinct length, no padding at all
        let g = length_groups(&lens, 0);
        assert_eq!(slots(&lens, &g), lens.iter().sum::<usize>());
        assert_eq!(g.len(), 6);
        // passes dearer than any padding: one group
        assert_eq!(length_groups(&lens, usize::MAX), vec![0..8]);
        assert_eq!(length_groups(&lens, 100_000), vec![0..8]);
        // in between: the long tail alone, the short texts together
        let g = length_groups(&lens, 32);
        assert_eq!(g.last(), Some(&(7..8)));
        assert!(slots(&lens, &g) + 32 * g.len() < 8 * 128 + 32);
    }

    #[test]
    fn the_cover_is_the_cheapest() {
        // against every cut of a small batch (2^(n-1) covers)
        let lens = [2, 5, 5, 6, 11, 12, 30];
        let n = lens.len();
        for overhead in [0, 3, 7, 20, 64] {
            let mut least = usize::MAX;
            for mask in 0..1u32 << (n - 1) {
                let (mut cost, mut start) = (0, 0);
                for j in 1..=n {
                    if j == n || mask >> (j - 1) & 1 == 1 {
                        cost += (j - start) * lens[j - 1] + overhead;
                        start = j;
                    }
                }
                least = least.min(cost);
            }
            let g = length_groups(&lens, overhead);
            assert_eq!(
                slots(&lens, &g) + overhead * g.len(),
                least,
                "overhead {overhead}"
            );
        }
    }
}
