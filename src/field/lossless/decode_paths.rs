//! Tests of the lossless decoder's bit-position loops against the byte-wise loop alone, on
//! streams that mix short codes, raw bits and zero runs, whole and corrupted.

use super::*;
use crate::field::lossless::encode::encode_stream;
use crate::field::test_rng::Rng;

/// What decoding `stream` gives: the values, or the failing lane and reason.
type Decoded = std::result::Result<Vec<u32>, (usize, &'static str)>;

/// Widened words of a buffer that was made initialised (the decoder stores only
/// initialised values).
fn words<W: Word>(out: &[MaybeUninit<W>]) -> Vec<u32> {
    // SAFETY: the buffer was created with initialised values, and the decoder stores only
    // `MaybeUninit::new` values.
    out.iter()
        .map(|v| unsafe { v.assume_init() }.to_u32())
        .collect()
}

/// Decodes with the byte-wise loop only, segment by segment.
fn bytewise<W: Word>(stream: &Stream<'_>, m: usize, width: u32) -> Decoded {
    let mut lut = Box::new([0 as Entry; LUT_SIZE]);
    let runs = fill_lut(&stream.lengths, width, &mut lut);
    let mut out = vec![MaybeUninit::new(W::default()); m];
    let mut rest = &mut out[..];
    for (s, seg) in stream.segments.iter().enumerate() {
        let r = segment_range(m, stream.segments.len(), s);
        let (part, b) = rest.split_at_mut(r.len());
        rest = b;
        let mut lane = Lane::new(seg, part);
        let r = if runs {
            lane.finish::<true>(s, &lut)
        } else {
            lane.finish::<false>(s, &lut)
        };
        r.map_err(|(k, _, why)| (k, why))?;
        lane.check_end().map_err(|(_, why)| (s, why))?;
    }
    Ok(words(&out))
}

/// Decodes with [`decode_stream`] (the lockstep loops).
fn lockstep<W: Word>(stream: &Stream<'_>, m: usize, width: u32) -> Decoded {
    let mut out = vec![MaybeUninit::new(W::default()); m];
    match decode_stream(&[], stream, stream.segments.len(), width, &mut out) {
        Ok(()) => Ok(words(&out)),
        Err(_) => Err((0, "")),
    }
}

/// Zigzag values of `width` bits, each segment of its own kind: zero runs, small values,
/// wide values with raw bits, or all mixed; `zeros` false keeps every value nonzero.
fn values(rng: &mut Rng, m: usize, segments: usize, width: u32, zeros: bool) -> Vec<u32> {
    let mut z = Vec::with_capacity(m);
    for s in 0..segments {
        let kind = (s + rng.below(4) as usize) % 4;
        let r = segment_range(m, segments, s);
        while z.len() < r.end {
            let v = match kind {
                0 if zeros && rng.below(8) != 0 => {
                    let run = 1 + rng.below(300) as usize;
                    z.extend(std::iter::repeat_n(0, run.min(r.end - z.len())));
                    continue;
                }
                1 => rng.below(16) as u32,
                2 => (rng.next() >> (64 - width + rng.below(width as u64) as u32)) as u32,
                _ => match rng.below(4) {
                    0 => (rng.next() >> (64 - width)) as u32,
                    1 => (rng.next() >> 60) as u32,
                    _ => rng.below(3) as u32,
                },
            };
            z.push(if zeros { v } else { v.max(1) });
        }
    }
    z
}

fn check<W: Word>(width: u32, zeros: bool, seed: u64) {
    let mut rng = Rng(seed);
    for (m, segments) in [(8 * 1200 + 5, 8), (6 * 700 + 3, 6), (4 * 3000, 4), (77, 5)] {
        let z = values(&mut rng, m, segments, width, zeros);
        let (lengths, segs) = encode_stream(&z, segments, width);
        let stream = Stream {
            lengths: lengths.clone(),
            segments: segs.iter().map(|s| &s[..]).collect(),
        };
        assert_eq!(lockstep::<W>(&stream, m, width), Ok(z.clone()));
        assert_eq!(bytewise::<W>(&stream, m, width), Ok(z.clone()));
        // Corrupted: a changed byte, a cut or an extended segment; both loops must agree
        // on success and on the values.
        for _ in 0..200 {
            let mut segs = segs.clone();
            let s = rng.below(segments as u64) as usize;
            match rng.below(3) {
                0 if !segs[s].is_empty() => {
                    let at = rng.below(segs[s].len() as u64) as usize;
                    segs[s][at] ^= 1 << rng.below(8);
                }
                1 => {
                    let cut = rng.below(segs[s].len() as u64 + 1) as usize;
                    segs[s].truncate(cut);
                }
                _ => segs[s].extend_from_slice(&[rng.below(256) as u8; 9]),
            }
            let bad = Stream {
                lengths: lengths.clone(),
                segments: segs.iter().map(|s| &s[..]).collect(),
            };
            let (a, b) = (lockstep::<W>(&bad, m, width), bytewise::<W>(&bad, m, width));
            assert_eq!(a.is_ok(), b.is_ok());
            if let (Ok(a), Ok(b)) = (a, b) {
                assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn lockstep_matches_bytewise_with_runs() {
    check::<u32>(32, true, 1);
    check::<u16>(16, true, 2);
}

#[test]
fn lockstep_matches_bytewise_without_runs() {
    check::<u32>(32, false, 3);
    check::<u16>(16, false, 4);
}

/// The inverse of the differences by definition: each value its zigzag residual plus the
/// Lorenzo prediction over `axes` (the subsets of the differenced axes along which the
/// value has a predecessor, signed by their size).
fn lorenzo<W: Word>(res: &[W], shape: &[u32], axes: u8) -> Vec<W> {
    let st = strides(shape);
    let mut x = res.to_vec();
    for i in 0..x.len() {
        let mut usable = 0u8;
        for (a, &s) in st.iter().enumerate() {
            if axes >> a & 1 == 1 && (i / s) % shape[a] as usize >= 1 {
                usable |= 1 << a;
            }
        }
        let mut p = W::default();
        let mut t = usable;
        while t != 0 {
            let off: usize = (0..shape.len())
                .filter(|a| t >> a & 1 == 1)
                .map(|a| st[a])
                .sum();
            p = if t.count_ones() % 2 == 1 {
                p.add(x[i - off])
            } else {
                p.sub(x[i - off])
            };
            t = (t - 1) & usable;
        }
        x[i] = res[i].unzig().add(p);
    }
    x
}

fn check_reconstruct<W: Word>(seed: u64) {
    let mut rng = Rng(seed);
    let shapes: [&[u32]; 6] = [
        &[1000],
        &[5, 77],
        &[3, 4, 130],
        &[2, 3, 5, 71],
        &[9, 64],
        &[4, 7, 3],
    ];
    for shape in shapes {
        let n: usize = shape.iter().map(|&s| s as usize).product();
        let st = strides(shape);
        for axes in 1..1u8 << shape.len() {
            let res: Vec<W> = (0..n)
                .map(|_| {
                    W::from_u32(match rng.below(3) {
                        0 => rng.below(5) as u32,
                        _ => rng.next() as u32,
                    })
                })
                .collect();
            let want = lorenzo(&res, shape, axes);
            // Whole, and in pieces that start and end mid-row.
            for step in [n, 37, 300] {
                let mut out = res.clone();
                let mut j = 0;
                while j < n {
                    let end = (j + step).min(n);
                    reconstruct(&mut out, j, end, shape, &st, axes);
                    j = end;
                }
                let same = out.iter().zip(&want).all(|(a, b)| a.to_u32() == b.to_u32());
                assert!(same, "shape {shape:?} axes {axes:b} step {step}");
            }
        }
    }
}

#[test]
fn reconstruct_matches_the_definition() {
    check_reconstruct::<u32>(5);
    check_reconstruct::<u16>(6);
}
