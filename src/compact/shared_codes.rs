//! Codes shared by neighbouring patches. The decoder builds a channel's tables from its code
//! lengths once per patch, unless the patch before it in the row had the same lengths (see
//! `decode.rs`); on a disparity map whose patches code in about 0.2 bits per pixel,
//! building them was a sixth of the decode time. Neighbouring patches have similar
//! statistics, so the encoder gives a run of them one code, made for their symbols
//! together, where that costs at most [`SHARED_CODE_BITS`] per table build it saves.
//! Nothing in the format changes: each patch still writes its code lengths and decodes
//! alone, on the CPU and the GPU.

use super::encode::for_each_length_field;
use super::huffman::{self, MAX_TOKENS};

/// Most bits a shared code may add to a row's stream per table build it saves the decoder:
/// 64. A build costs about as much time as decoding 600-800 pixels of a smooth image, so
/// the trade pays most where patches code in few bits (label maps, disparity maps,
/// artwork: 6-21 % faster to decode, 0.3-2.4 % larger) and little is spent on photos
/// (0.1-0.3 % larger, up to 9 % faster).
pub(crate) const SHARED_CODE_BITS: u64 = 64;

/// Most patches one shared code spans; it keeps the summed token counts within `u32`.
const GROUP_MAX: usize = 256;

/// Code lengths for each coded channel of a row of patches, given their token histograms
/// (`histograms[patch][channel]`, all of one alphabet). With `shared` false each channel
/// gets its own optimal code; otherwise consecutive patches share one, judged greedily from
/// the left: a patch joins the code of the patches before it if the code made for all their
/// symbols together costs no more than their own codes plus [`SHARED_CODE_BITS`] for each
/// build saved. The patches compared are those that code channel `c`,
/// in order: a patch with fewer coded channels (a palette patch) leaves the decoder's tables
/// of the others as they were.
pub(crate) fn choose_codes(histograms: &[Vec<&[u32]>], shared: bool) -> Vec<Vec<[u8; MAX_TOKENS]>> {
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
        let patches: Vec<usize> = (0..histograms.len())
            .filter(|&i| histograms[i].len() > c)
            .collect();
        let mut group = Group {
            members: Vec::new(),
            sum: [0; MAX_TOKENS],
            own: 0,
            lengths: [0; MAX_TOKENS],
        };
        for &i in &patches {
            let hist = histograms[i][c];
            let own = cost(hist, &codes[i][c]);
            if !group.members.is_empty() && group.members.len() < GROUP_MAX {
                let mut sum = group.sum;
                for (s, &n) in sum.iter_mut().zip(hist) {
                    *s += n;
                }
                let mut lengths = [0u8; MAX_TOKENS];
                huffman::code_lengths(&sum[..hist.len()], &mut lengths[..hist.len()]);
                let together = cost(&sum[..hist.len()], &lengths)
                    + (group.members.len() as u64) * table_bits(&lengths);
                // Joining saves one build for each patch already in the group.
                let allowed = group.own + own + SHARED_CODE_BITS * group.members.len() as u64;
                if together <= allowed {
                    group.members.push(i);
                    group.sum = sum;
                    group.own += own;
                    group.lengths = lengths;
                    continue;
                }
            }
            group.assign(&mut codes, c);
            group = Group {
                members: vec![i],
                sum: [0; MAX_TOKENS],
                own,
                lengths: codes[i][c],
            };
            group.sum[..hist.len()].copy_from_slice(hist);
        }
        group.assign(&mut codes, c);
    }
    codes
}

/// Consecutive patches that share one code for a channel.
struct Group {
    members: Vec<usize>,
    /// Their token counts together.
    sum: [u32; MAX_TOKENS],
    /// Bits of their symbols and code tables under their own codes.
    own: u64,
    /// The code they share.
    lengths: [u8; MAX_TOKENS],
}

impl Group {
    fn assign(&self, codes: &mut [Vec<[u8; MAX_TOKENS]>], c: usize) {
        for &i in &self.members {
            codes[i][c] = self.lengths;
        }
    }
}

/// Bits of the code-length table of `lengths` plus those of the symbols of `hist` coded with
/// it (every token of `hist` has a code in `lengths`); raw bits aside.
fn cost(hist: &[u32], lengths: &[u8; MAX_TOKENS]) -> u64 {
    let lengths = &lengths[..hist.len()];
    let symbols = if huffman::is_single(lengths) {
        0
    } else {
        hist.iter()
            .zip(lengths)
            .map(|(&n, &l)| n as u64 * l as u64)
            .sum()
    };
    table_bits(lengths) + symbols
}

/// Bits of the code-length table of `lengths` (token 0 up to the last used one).
fn table_bits(lengths: &[u8]) -> u64 {
    let ntok = lengths.iter().rposition(|&l| l > 0).map_or(0, |t| t + 1);
    let mut bits = 0u64;
    for_each_length_field(&lengths[..ntok], |_, b| bits += b as u64);
    bits
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
    /// that channel); returns the builds saved.
    fn check_row(histograms: &[Vec<&[u32]>], codes: &[Vec<[u8; MAX_TOKENS]>]) -> u64 {
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
                chosen_bits += cost(hist, lengths);
                own_bits += cost(hist, &own[c]);
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
        saved
    }

    #[test]
    fn without_sharing_each_patch_has_its_optimal_code() {
        let mut seed = 1;
        let hists: Vec<[u32; TOKENS]> = (0..6)
            .map(|i| histogram(&bases()[i % 2], 50, &mut seed))
            .collect();
        let rows: Vec<Vec<&[u32]>> = hists.iter().map(|h| vec![&h[..]]).collect();
        let codes = choose_codes(&rows, false);
        for (h, code) in hists.iter().zip(&codes) {
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
        assert_eq!(check_row(&rows, &codes), 18);
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
        assert!(check_row(&rows, &codes) >= 6);
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
