//! Codes shared by neighbouring patches. The CPU decoder builds a channel's tables from its
//! code lengths once per patch, unless the last patch before it in the row that coded that
//! channel had the same lengths (see `decode.rs`); on a disparity map whose patches code in
//! about 0.2 bits per pixel, building them was a sixth of the decode time. Neighbouring
//! patches have similar statistics, so the encoder gives a run of them one code, made for
//! their symbols together, where each patch that joins adds at most [`SHARED_CODE_BITS`] of
//! code tables and symbols (segment-length fields and padding aside).
//! Nothing in the format changes: each patch still writes its code lengths and decodes
//! alone, on the CPU and the GPU.

use super::huffman::{self, code_cost, table_bits, MAX_TOKENS};

/// Most bits (code tables and symbols) a patch may add to a row's stream by joining a
/// shared code, for the one table build that saves the decoder: 96. A build costs about as
/// much time as decoding 600-800 pixels of a smooth image. Against no sharing, on the
/// shared test images: label, gray and artwork images decode 5-17 % faster for files
/// 0.2-1.5 % larger; photos grow 0.1-0.4 % and decode 2 % slower to 11 % faster. (With the
/// allowance pooled over a group, 64 bits measured the same; each join now pays for itself.)
pub(crate) const SHARED_CODE_BITS: u64 = 96;

/// Code lengths for each coded channel of a run of patches, given their token histograms
/// (`histograms[patch][channel]`, all of one alphabet; at most 2^16 patches, so that summed
/// counts fit in `u32`). With `shared` false each channel gets its own optimal code;
/// otherwise consecutive patches share one, judged greedily from the left: a patch joins
/// the code of the patches before it if the code made for all their symbols together costs
/// at most [`SHARED_CODE_BITS`] more (code tables and symbols) than the group's code so far
/// and the patch's own code, the price of the one table build that joining saves. The
/// patches compared are those that code channel `c`, in order: a patch with fewer coded
/// channels (a palette patch) leaves the decoder's tables of the others as they were.
pub(crate) fn choose_codes(histograms: &[Vec<&[u32]>], shared: bool) -> Vec<Vec<[u8; MAX_TOKENS]>> {
    debug_assert!(histograms.len() <= 1 << 16);
    let mut codes: Vec<Vec<[u8; MAX_TOKENS]>> = histograms
        .iter()
        .map(|patch| {
            patch
                .iter()
                .map(|hist| {
                    let mut lengths = [0u8; MAX_TOKENS];
                    huffman::code_lengths(hist, &mut lengths[..hist.len()]);
                    lengths
                })
                .collect()
        })
        .collect();
    if !shared {
        return codes;
    }
    let channels = histograms.iter().map(Vec::len).max().unwrap_or(0);
    for c in 0..channels {
        let mut group: Option<Group> = None;
        for i in (0..histograms.len()).filter(|&i| histograms[i].len() > c) {
            let hist = histograms[i][c];
            let own = code_cost(hist, &codes[i][c]);
            if let Some(group) = &mut group {
                if group.join(i, hist, own) {
                    continue;
                }
                group.assign(&mut codes, c);
            }
            let mut sum = [0; MAX_TOKENS];
            sum[..hist.len()].copy_from_slice(hist);
            group = Some(Group {
                members: vec![i],
                sum,
                bits: own,
                lengths: codes[i][c],
            });
        }
        if let Some(group) = group {
            group.assign(&mut codes, c);
        }
    }
    codes
}

/// Consecutive patches that share one code for a channel.
struct Group {
    members: Vec<usize>,
    /// Their token counts together.
    sum: [u32; MAX_TOKENS],
    /// Bits of their symbols and code tables under the shared code.
    bits: u64,
    /// The code they share.
    lengths: [u8; MAX_TOKENS],
}

impl Group {
    /// Takes patch `i` (token counts `hist`, `own` bits under its own code) into the group
    /// if that costs at most [`SHARED_CODE_BITS`] more than keeping it apart.
    fn join(&mut self, i: usize, hist: &[u32], own: u64) -> bool {
        let mut sum = self.sum;
        for (s, &n) in sum.iter_mut().zip(hist) {
            *s += n;
        }
        let mut lengths = [0u8; MAX_TOKENS];
        huffman::code_lengths(&sum[..hist.len()], &mut lengths[..hist.len()]);
        // Every member writes the shared table; their symbols together, once.
        let together = code_cost(&sum[..hist.len()], &lengths)
            + self.members.len() as u64 * table_bits(&lengths);
        if together > self.bits + own + SHARED_CODE_BITS {
            return false;
        }
        self.members.push(i);
        (self.sum, self.bits, self.lengths) = (sum, together, lengths);
        true
    }

    fn assign(&self, codes: &mut [Vec<[u8; MAX_TOKENS]>], c: usize) {
        for &i in &self.members {
            codes[i][c] = self.lengths;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::compact::alphabet_size;

    const TOKENS: usize = alphabet_size(8) as usize;

    /// Token counts near `base`, each moved by up to `spread` (a small LCG, seeded).
    fn histogram(base: &[u32; TOKENS], spread: u32, seed: &mut u64) -> [u32; TOKENS] {
        let mut h = *base;
        for v in h.iter_mut() {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if *v > 0 || (*seed >> 60) == 0 {
                *v += ((*seed >> 33) as u32) % (spread + 1);
            }
        }
        h
    }

    /// A smooth image's counts (few, skewed tokens) and a textured one's (many, flatter).
    fn bases() -> [[u32; TOKENS]; 2] {
        let mut smooth = [0u32; TOKENS];
        smooth[..6].copy_from_slice(&[900, 300, 120, 40, 10, 3]);
        smooth[24] = 500;
        let mut textured = [0u32; TOKENS];
        for (t, v) in textured.iter_mut().enumerate().take(20) {
            *v = 400 / (t as u32 + 1);
        }
        [smooth, textured]
    }

    /// Checks the choice for one row: every code is valid and codes every token its patch
    /// uses, and the row's bits exceed its own codes' by at most SHARED_CODE_BITS per
    /// build saved (a patch whose code for a channel equals that of the last patch coding
    /// that channel); returns the builds saved and the bits over own codes (may be negative:
    /// a shared code's table can be cheaper).
    fn check_row(histograms: &[Vec<&[u32]>], codes: &[Vec<[u8; MAX_TOKENS]>]) -> (u64, i64) {
        let own = choose_codes(histograms, false);
        let (mut chosen_bits, mut own_bits, mut saved) = (0u64, 0u64, 0u64);
        let mut last: Vec<Option<[u8; MAX_TOKENS]>> = vec![None; 4];
        for ((hists, chosen), own) in histograms.iter().zip(codes).zip(&own) {
            assert_eq!(hists.len(), chosen.len());
            for (c, (hist, lengths)) in hists.iter().zip(chosen).enumerate() {
                assert_eq!(huffman::check_lengths(&lengths[..TOKENS]), Ok(()));
                assert!(lengths[TOKENS..].iter().all(|&l| l == 0));
                for (t, (&n, &l)) in hist.iter().zip(lengths).enumerate() {
                    assert!(n == 0 || l > 0, "token {t} is used but has no code");
                }
                chosen_bits += code_cost(hist, lengths);
                own_bits += code_cost(hist, &own[c]);
                if last[c] == Some(*lengths) {
                    saved += 1;
                }
                last[c] = Some(*lengths);
            }
        }
        assert!(
            chosen_bits <= own_bits + SHARED_CODE_BITS * saved,
            "{chosen_bits} bits shared, {own_bits} own, {saved} builds saved"
        );
        (saved, chosen_bits as i64 - own_bits as i64)
    }

    #[test]
    fn without_sharing_each_patch_has_its_optimal_code() {
        let mut seed = 1;
        let hists: Vec<[u32; TOKENS]> = (0..6)
            .map(|i| histogram(&bases()[i % 2], 50, &mut seed))
            .collect();
        let rows: Vec<Vec<&[u32]>> = hists.iter().map(|h| vec![&h[..]]).collect();
        for (h, code) in hists.iter().zip(choose_codes(&rows, false)) {
            let mut lengths = [0u8; MAX_TOKENS];
            huffman::code_lengths(h, &mut lengths[..TOKENS]);
            assert_eq!(code[0], lengths);
        }
    }

    #[test]
    fn identical_patches_share_one_code_at_no_cost() {
        let h = bases()[0];
        let rows: Vec<Vec<&[u32]>> = (0..10).map(|_| vec![&h[..], &h[..]]).collect();
        let codes = choose_codes(&rows, true);
        assert_eq!(check_row(&rows, &codes), (18, 0));
    }

    #[test]
    fn similar_patches_share_and_different_ones_do_not() {
        let [smooth, textured] = bases();
        let mut seed = 7;
        // Five similar smooth patches, then five textured ones.
        let hists: Vec<[u32; TOKENS]> = (0..10)
            .map(|i| histogram(if i < 5 { &smooth } else { &textured }, 3, &mut seed))
            .collect();
        let rows: Vec<Vec<&[u32]>> = hists.iter().map(|h| vec![&h[..]]).collect();
        let codes = choose_codes(&rows, true);
        assert!(check_row(&rows, &codes).0 >= 6);
        assert_ne!(
            codes[4][0], codes[5][0],
            "a smooth and a textured patch share a code"
        );
    }

    #[test]
    fn random_rows_keep_the_bound() {
        let mut seed = 42;
        for row in 0..200 {
            let n = 1 + row % 17;
            let spread = [0, 2, 20, 200, 2000][row % 5];
            let hists: Vec<Vec<[u32; TOKENS]>> = (0..n)
                .map(|i| {
                    // Some patches code fewer channels (a palette patch codes one).
                    let channels = if (i + row) % 5 == 3 { 1 } else { 3 };
                    (0..channels)
                        .map(|c| histogram(&bases()[(c + i / 4) % 2], spread, &mut seed))
                        .collect()
                })
                .collect();
            let rows: Vec<Vec<&[u32]>> = hists
                .iter()
                .map(|p| p.iter().map(|h| &h[..]).collect())
                .collect();
            check_row(&rows, &choose_codes(&rows, true));
        }
    }

    /// Each join pays for itself: a patch whose joining costs more than SHARED_CODE_BITS is
    /// kept apart even after a long group of identical patches (whose joins cost nothing),
    /// so a group's slack is not spent on one unlike patch.
    #[test]
    fn a_long_group_does_not_spend_its_slack_on_one_join() {
        let smooth = bases()[0];
        let own = |h: &[u32]| super::super::huffman::coded_bits(h, 0);
        // Patches like `smooth` with `m` more tokens in use, until joining ten copies of
        // `smooth` costs more than one build's allowance but less than ten.
        let (unlike, marginal) = (1..40)
            .map(|m| {
                let mut b = smooth;
                for v in &mut b[6..6 + m] {
                    *v += 25;
                }
                let mut sum = b;
                for (s, &a) in sum.iter_mut().zip(&smooth) {
                    *s += 10 * a;
                }
                let mut l = [0u8; MAX_TOKENS];
                huffman::code_lengths(&sum, &mut l[..TOKENS]);
                let together = code_cost(&sum, &l) + 10 * table_bits(&l);
                (
                    b,
                    together as i64 - 10 * own(&smooth) as i64 - own(&b) as i64,
                )
            })
            .find(|&(_, extra)| extra > SHARED_CODE_BITS as i64)
            .expect("a patch unlike enough");
        assert!(marginal < 10 * SHARED_CODE_BITS as i64, "{marginal} bits");
        let mut rows: Vec<Vec<&[u32]>> = (0..10).map(|_| vec![&smooth[..]]).collect();
        rows.push(vec![&unlike[..]]);
        let codes = choose_codes(&rows, true);
        assert_eq!(check_row(&rows, &codes).0, 9);
        assert_ne!(codes[9][0], codes[10][0], "joined at {marginal} bits");
    }

    /// A patch that codes fewer channels leaves the others' tables as they were, so the
    /// patches on either side of it may share those channels' codes.
    #[test]
    fn sharing_reaches_across_a_patch_with_fewer_channels() {
        let [smooth, textured] = bases();
        let rows: Vec<Vec<&[u32]>> = vec![
            vec![&textured[..], &textured[..]],
            vec![&smooth[..]],
            vec![&textured[..], &textured[..]],
        ];
        let codes = choose_codes(&rows, true);
        assert_eq!(codes[0][1], codes[2][1]);
        check_row(&rows, &codes);
    }
}
