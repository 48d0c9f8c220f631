//! Tests of the GPU encoder: the whole pipeline on the kernels' CPU twins gives
//! [`encode_bounded`]'s bytes (no GPU needed), unsupported or hostile arguments are errors,
//! and (feature `gpu`, lavapipe in CI) the kernels on the GPU give the same bytes, which
//! decode within the bound on the CPU and on the GPU.

use std::borrow::Cow;

use super::gpu_encode::*;
use super::*;
use crate::error::Result;
use crate::field::test_rng::Rng;
use crate::field::Bound;
use crate::gpu::cpu_twin::encode as twin;
use crate::gpu::encode_abi::{
    EncodeParams, EncodeSegment, ENCODE_WORKGROUP_SIZE, EST_ITEM, EST_WORDS, FILL_WORDS,
};

/// The kernels' twins as the encoder's device.
struct Twin {
    values: Vec<u32>,
    q: Vec<u32>,
    z: Vec<u32>,
    flags: Vec<u32>,
}

impl EncodeDevice for Twin {
    fn extent(&mut self, p: &EncodeParams) -> Result<[u32; 2]> {
        let mut e = [u32::MAX, 0];
        twin::value_range(&self.values, &mut e, p);
        Ok(e)
    }

    fn bins(&mut self, p: &EncodeParams) -> Result<Vec<u32>> {
        let n = p.count as usize;
        self.q = vec![0; n];
        let mut blocks = vec![0; (FILL_WORDS * p.blocks + 1) as usize];
        self.flags = vec![0; n.div_ceil(32)];
        twin::quantise(&self.values, &mut self.q, p);
        twin::fill_blocks(&self.q, &mut blocks, p);
        twin::fill_carry(&mut blocks, p);
        twin::fill_apply(&mut self.q, &blocks, &mut self.flags, p);
        let per = EST_ITEM * ENCODE_WORKGROUP_SIZE;
        let mut est = vec![0; (p.count.div_ceil(per) * p.sets * EST_WORDS) as usize];
        twin::estimate(&self.q, &mut est, p);
        Ok(est)
    }

    fn histograms(
        &mut self,
        p: &EncodeParams,
        segments: &[EncodeSegment],
    ) -> Result<(Vec<u32>, Vec<u32>)> {
        self.z = vec![0; p.count as usize];
        twin::differences(&self.q, &mut self.z, p);
        let mut hist = vec![0; 3 * segments.len() * crate::gpu::encode_abi::HIST_WORDS as usize];
        twin::histogram(&self.z, segments, &mut hist);
        Ok((hist, std::mem::take(&mut self.flags)))
    }

    fn pack(
        &mut self,
        _p: &EncodeParams,
        segments: &[EncodeSegment],
        codes: &[u32],
        words: u64,
    ) -> Result<Vec<u32>> {
        let mut packed = vec![0; words as usize];
        twin::pack(&self.z, segments, codes, &mut packed);
        Ok(packed)
    }
}

/// The pipeline on the twins.
fn twin_encode(values: &[f32], shape: &[u32], o: &BoundedOptions) -> Result<Vec<u8>> {
    let plan = plan_encode(values.len(), shape, o, u64::MAX)?;
    let mut dev = Twin {
        values: values.iter().map(|v| v.to_bits()).collect(),
        q: Vec::new(),
        z: Vec::new(),
        flags: Vec::new(),
    };
    encode_planned(&mut dev, plan, shape, o, || Ok(Cow::Borrowed(values)))
}

/// Kinds of test arrays.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A smooth field with noise.
    Smooth,
    /// Post-ReLU activations: about half exact zeros.
    Relu,
    /// One value.
    Constant,
    /// Smooth, with NaN, infinities, the fill value and subnormals sprinkled in (and a run
    /// of them at the start).
    Exceptions,
    /// Only NaN and the fill value.
    AllSpecial,
}

fn make(kind: Kind, n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let x = i as f32 * 0.0173;
            let smooth = x.sin() * 30.0 + (x * 0.37).cos() * 4.0 + rng.unit() * 0.5;
            match kind {
                Kind::Smooth => smooth,
                Kind::Relu => (smooth * 0.1 + rng.unit() - 0.5).max(0.0),
                Kind::Constant => 2.5,
                Kind::Exceptions => match (i * 7 + 3) % 97 {
                    _ if i < 3 => f32::NAN,
                    0 => f32::NAN,
                    5 => f32::INFINITY,
                    9..=11 => -9999.0,
                    13 => 1e-39,
                    _ => smooth,
                },
                Kind::AllSpecial => {
                    if i % 3 == 0 {
                        -9999.0
                    } else {
                        f32::from_bits(0x7fc0_0000 + i as u32 % 7)
                    }
                }
            }
        })
        .collect()
}

/// The cases: (values, shape, options), covering 1 to 4 axes, every axis set of small
/// arrays, tiny arrays, lengths off the chunk and segment sizes, bounds 1e-1 to 1e-5 of
/// the range, chunk and segment settings.
fn cases() -> Vec<(Vec<f32>, Vec<u32>, BoundedOptions)> {
    let mut rng = Rng(99);
    let shapes: &[&[u32]] = &[
        &[1],
        &[2],
        &[5],
        &[1000],
        &[3, 1],
        &[17, 33],
        &[64, 129],
        &[3, 5, 7],
        &[8, 16, 33],
        &[2, 3, 5, 7],
        &[4, 3, 16, 16],
        &[3001],
    ];
    let kinds = [
        Kind::Smooth,
        Kind::Relu,
        Kind::Constant,
        Kind::Exceptions,
        Kind::AllSpecial,
    ];
    let mut out = Vec::new();
    let mut k = 0usize;
    for shape in shapes {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let nd = shape.len();
        for (j, &kind) in kinds.iter().enumerate() {
            let values = make(kind, n, &mut rng);
            let range = 70.0;
            let sets: Vec<u8> = if n <= 2000 {
                (1..1u8 << nd).collect()
            } else {
                vec![1, (1u8 << nd) - 1]
            };
            for set in sets {
                k += 1;
                let rel = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5][(k + j) % 5];
                let (chunk_log2, segments) = [(16, 8), (8, 3), (10, 32), (9, 1)][k % 4];
                out.push((
                    values.clone(),
                    shape.to_vec(),
                    BoundedOptions {
                        fill_value: (!k.is_multiple_of(3)).then_some(-9999.0),
                        predictor: Some(Predictor::Differences),
                        // Every fifth case leaves the set to the estimate.
                        axes: (!k.is_multiple_of(5)).then_some(set),
                        chunk_log2,
                        segments,
                        parallel: k.is_multiple_of(2),
                        // Every seventh case asks a relative bound (resolved over the
                        // extent the GPU finds).
                        ..BoundedOptions::new(if k.is_multiple_of(7) {
                            Bound::Relative(rel)
                        } else {
                            Bound::Absolute(rel * range)
                        })
                    },
                ));
            }
        }
    }
    out
}

#[test]
fn the_twin_pipeline_gives_the_cpu_encoders_bytes() {
    let cases = cases();
    assert!(cases.len() >= 200, "{}", cases.len());
    for (i, (values, shape, o)) in cases.iter().enumerate() {
        let cpu = encode_bounded(values, shape, o);
        let twin = twin_encode(values, shape, o);
        match (&cpu, &twin) {
            (Ok(a), Ok(b)) => assert!(a == b, "case {i}: {shape:?} {o:?}: bytes differ"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {i}"),
            _ => panic!(
                "case {i}: {shape:?} {o:?}: cpu {:?} twin {:?}",
                cpu.is_ok(),
                twin.is_ok()
            ),
        }
    }
}

/// Long zero runs (past one run token), runs at segment ends, pairs at segment ends and
/// values past 2^16 residuals: the tokenizer twin's symbols are the CPU's.
#[test]
fn the_twin_tokenizer_handles_long_runs_and_segment_edges() {
    let mut values = vec![0.0f32; 70_000];
    for (i, v) in values.iter_mut().enumerate() {
        if i % 9000 == 8999 || (40_000..40_003).contains(&i) || i > 69_990 {
            *v = (i % 13) as f32 * 3.0;
        }
    }
    for (chunk_log2, segments) in [(16, 2), (17, 4), (15, 1), (12, 7)] {
        let o = BoundedOptions {
            predictor: Some(Predictor::Differences),
            axes: Some(1),
            chunk_log2,
            segments,
            ..BoundedOptions::new(0.01)
        };
        let cpu = encode_bounded(&values, &[70_000], &o).unwrap();
        assert_eq!(twin_encode(&values, &[70_000], &o).unwrap(), cpu, "{o:?}");
    }
}

#[test]
fn unsupported_and_hostile_arguments_are_errors() {
    let v = vec![1.0f32; 100];
    let good = BoundedOptions {
        predictor: Some(Predictor::Differences),
        axes: Some(1),
        ..BoundedOptions::new(0.1)
    };
    assert!(twin_encode(&v, &[100], &good).is_ok());
    let bad: Vec<(Vec<u32>, BoundedOptions)> = vec![
        (
            vec![100],
            BoundedOptions {
                predictor: None,
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                predictor: Some(Predictor::Lattice),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                axes: Some(2),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                axes: Some(0),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                segments: 0,
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                segments: 33,
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                chunk_log2: 21,
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                chunk_log2: 7,
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                bound: Bound::Absolute(0.0),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                bound: Bound::Absolute(f64::NAN),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                bound: Bound::Absolute(-1.0),
                ..good.clone()
            },
        ),
        (
            vec![100],
            BoundedOptions {
                bound: Bound::Absolute(1e35),
                ..good.clone()
            },
        ),
        (vec![99], good.clone()),
        (vec![], good.clone()),
        (vec![10, 10, 1, 1, 1], good.clone()),
        (vec![0, 100], good.clone()),
        (vec![u32::MAX, u32::MAX], good.clone()),
    ];
    for (shape, o) in bad {
        assert!(twin_encode(&v, &shape, &o).is_err(), "{shape:?} {o:?}");
    }
    // Bindings past the device's limit are refused before any table is built.
    let e = plan_encode(1 << 20, &[1 << 20], &good, 1 << 16)
        .err()
        .expect("refused");
    assert!(matches!(e, crate::Error::Limits(_)), "{e:?}");
    let tiny = BoundedOptions {
        chunk_log2: 8,
        segments: 32,
        ..good.clone()
    };
    let e = plan_encode(1 << 24, &[1 << 24], &tiny, 1 << 26)
        .err()
        .expect("refused");
    assert!(matches!(e, crate::Error::Limits(_)), "{e:?}");
    // Segments of more than 2^15 values.
    let big = vec![1.0f32; 1 << 17];
    let o = BoundedOptions {
        chunk_log2: 17,
        segments: 2,
        ..good.clone()
    };
    assert!(twin_encode(&big, &[1 << 17], &o).is_err());
    // A bound too small for the range: the array stored exactly, the CPU encoder's bytes.
    let wide: Vec<f32> = (0..1000).map(|i| i as f32 * 1e3).collect();
    let o = BoundedOptions {
        bound: Bound::Absolute(1e-3),
        ..good.clone()
    };
    // So is a bound whose bin width would be subnormal.
    let tiny = BoundedOptions {
        bound: Bound::Absolute(1e-40),
        ..good.clone()
    };
    for (values, o) in [(&wide, o), (&wide, tiny)] {
        let cpu = encode_bounded(values, &[1000], &o).unwrap();
        let twin = twin_encode(values, &[1000], &o).unwrap();
        assert_eq!(cpu, twin);
        assert_eq!(
            crate::field::field_version(&twin),
            Some(crate::field::LOSSLESS_VERSION)
        );
    }
}

#[cfg(feature = "gpu")]
mod on_gpu {
    use super::*;
    use crate::decode::DecodeOptions;
    use crate::field::gpu::{decode_bounded_fields, encode_bounded_buffer, encode_bounded_gpu};
    use crate::gpu::tests::support::gpu;
    use crate::gpu::GpuEncoder;

    fn encoder() -> Option<GpuEncoder> {
        gpu().map(|d| GpuEncoder::from_decoder(d).expect("encoder pipelines"))
    }

    /// Every case: the GPU's bytes are the CPU encoder's (or both refuse alike), and the
    /// file decodes within the bound on the CPU and on the GPU (bit for bit the same).
    #[test]
    fn gpu_encoder_gives_the_cpu_encoders_bytes() {
        let Some(enc) = encoder() else { return };
        let dec = gpu().unwrap();
        let mut files = Vec::new();
        for (i, (values, shape, o)) in cases().iter().enumerate() {
            let cpu = encode_bounded(values, shape, o);
            let got = encode_bounded_gpu(&enc, values, shape, o);
            match (&cpu, &got) {
                (Ok(a), Ok(b)) => assert!(a == b, "case {i}: {shape:?} {o:?}: bytes differ"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {i}"),
                _ => panic!(
                    "case {i}: cpu {:?} gpu {:?}",
                    cpu.as_ref().err(),
                    got.as_ref().err()
                ),
            }
            let Ok(file) = got else { continue };
            if crate::field::field_version(&file) == Some(crate::field::LOSSLESS_VERSION) {
                // A bound too fine for the bins: stored exactly, by both encoders.
                let (_, back) =
                    crate::field::decode_lossless(&file, &DecodeOptions::default()).unwrap();
                let crate::field::FloatVec::F32(back) = back else {
                    panic!("case {i}: float32 expected")
                };
                assert!(values
                    .iter()
                    .zip(&back)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
                continue;
            }
            let (h, back) = decode_bounded(&file, &DecodeOptions::default()).unwrap();
            if let Bound::Absolute(e) = o.bound {
                assert_eq!(h.bound, e, "case {i}");
            }
            for (j, (&v, &b)) in values.iter().zip(&back).enumerate() {
                let special = !v.is_finite()
                    || v.is_subnormal()
                    || o.fill_value.is_some_and(|f| f.to_bits() == v.to_bits());
                if special {
                    assert_eq!(v.to_bits(), b.to_bits(), "case {i} value {j}");
                } else {
                    assert!((v as f64 - b as f64).abs() <= h.bound, "case {i} value {j}");
                }
            }
            if i % 7 == 0 {
                files.push((file, back));
            }
        }
        let refs: Vec<&[u8]> = files.iter().map(|(f, _)| &f[..]).collect();
        let batch = decode_bounded_fields(dec, &refs, &DecodeOptions::default()).unwrap();
        for (k, (_, back)) in files.iter().enumerate() {
            let g = batch.read_back_array(k).unwrap();
            assert!(
                g.iter().zip(back).all(|(a, b)| a.to_bits() == b.to_bits()),
                "file {k}: GPU decode differs"
            );
        }
    }

    /// The GPU's bytes are the CPU encoder's on the shared arrays (relative bounds 1e-2 to
    /// 1e-4, every axis set).
    #[cfg(feature = "dataset")]
    #[test]
    fn gpu_encoder_matches_on_the_shared_arrays() {
        let Some(enc) = encoder() else { return };
        let mut n = 0;
        for_shared_cases(|name, v, shape, o| {
            let cpu = encode_bounded(v, shape, o);
            let got = encode_bounded_gpu(&enc, v, shape, o);
            match (cpu, got) {
                (Ok(a), Ok(b)) => assert!(a == b, "{name} {o:?}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{name} {o:?}: {:?} {:?}", a.err(), b.err()),
            }
            n += 1;
        });
        eprintln!("{n} encodes compared");
    }

    /// An activation-like array, its segments of the largest supported size and long zero
    /// runs; and the same values from a buffer already on the device, at an offset.
    #[test]
    fn gpu_encoder_on_device_buffers_and_large_segments() {
        let Some(enc) = encoder() else { return };
        let mut rng = Rng(3);
        let n = 8 * 16 * 32 * 32;
        let values = make(Kind::Relu, n, &mut rng);
        let shape = [8u32, 16, 32, 32];
        for (chunk_log2, segments, axes) in [(16, 8, 1u8), (17, 4, 3), (15, 1, 15), (20, 32, 0)] {
            let o = BoundedOptions {
                predictor: Some(Predictor::Differences),
                axes: (axes > 0).then_some(axes),
                chunk_log2,
                segments,
                ..BoundedOptions::new(1e-3)
            };
            let cpu = encode_bounded(&values, &shape, &o).unwrap();
            let got = encode_bounded_gpu(&enc, &values, &shape, &o).unwrap();
            assert!(cpu == got, "{o:?}");
        }
        let mut values = make(Kind::Exceptions, 5000, &mut rng);
        values.extend(std::iter::repeat_n(0.0, 70_000));
        let align = enc.device().limits().min_storage_buffer_offset_alignment as u64;
        let buffer = enc.device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("test values"),
            size: align + values.len() as u64 * 4,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        enc.queue()
            .write_buffer(&buffer, align, bytemuck::cast_slice(&values));
        let o = BoundedOptions {
            fill_value: Some(-9999.0),
            predictor: Some(Predictor::Differences),
            axes: Some(1),
            ..BoundedOptions::new(0.05)
        };
        let shape = [values.len() as u32];
        let cpu = encode_bounded(&values, &shape, &o).unwrap();
        let got = encode_bounded_buffer(&enc, &buffer, align, &shape, &o).unwrap();
        assert!(cpu == got);
        // A shape past the buffer's end, a hostile shape, an offset past the end: errors.
        let e = encode_bounded_buffer(&enc, &buffer, align, &[values.len() as u32 + 1], &o);
        assert!(e.is_err());
        for shape in [&[u32::MAX, u32::MAX][..], &[0], &[], &[1, 1, 1, 1, 1]] {
            assert!(encode_bounded_buffer(&enc, &buffer, 0, shape, &o).is_err());
        }
        assert!(encode_bounded_buffer(&enc, &buffer, u64::MAX - 3, &[1], &o).is_err());
        let e = encode_bounded_buffer(&enc, &buffer, 2, &[1], &o).unwrap_err();
        assert!(matches!(e, crate::Error::Parameter(_)), "{e:?}");
    }
}

/// A shared array's name, values, shape, fill value and value range.
#[cfg(feature = "dataset")]
type SharedCase = (String, Vec<f32>, Vec<u32>, Option<f32>, f64);

/// The shared arrays' first 2^18 values (whole slices along axis 0), in their own shape.
#[cfg(feature = "dataset")]
fn shared_cases() -> Vec<SharedCase> {
    super::gpu::tests::shared_arrays()
        .into_iter()
        .map(|(name, shape, values, fill)| {
            let slice: usize = shape[1..].iter().map(|&d| d as usize).product();
            let rows = ((1 << 18) / slice).clamp(1, shape[0] as usize);
            let mut own = shape.clone();
            own[0] = rows as u32;
            let v = values[..rows * slice].to_vec();
            let (lo, hi) = v
                .iter()
                .filter(|x| x.is_finite() && Some(**x) != fill)
                .fold((f64::MAX, f64::MIN), |(lo, hi), &x| {
                    (lo.min(x as f64), hi.max(x as f64))
                });
            (name, v, own, fill, (hi - lo).max(1e-30))
        })
        .collect()
}

/// Runs `f(name, values, shape, options)` for the shared arrays at relative bounds 1e-2 to
/// 1e-4, every axis set and the estimate's (arrays whose slice is constant, whose relative bound would be
/// below the GPU encoder's bin widths, are left out).
#[cfg(feature = "dataset")]
fn for_shared_cases(mut f: impl FnMut(&str, &[f32], &[u32], &BoundedOptions)) {
    for (name, v, shape, fill, range) in shared_cases() {
        if range <= 1e-30 {
            continue;
        }
        for rel in [1e-2, 1e-3, 1e-4] {
            for set in 0..1u8 << shape.len() {
                let o = BoundedOptions {
                    fill_value: fill,
                    predictor: Some(Predictor::Differences),
                    // 0: the estimate's set.
                    axes: (set > 0).then_some(set),
                    ..BoundedOptions::new(rel * range)
                };
                f(&name, &v, &shape, &o);
            }
        }
    }
}

/// The twin pipeline gives the CPU encoder's bytes on the shared arrays at relative bounds
/// 1e-2 to 1e-4, every axis set.
#[cfg(feature = "dataset")]
#[test]
fn the_twin_pipeline_matches_on_the_shared_arrays() {
    let mut n = 0;
    for_shared_cases(|name, v, shape, o| {
        let cpu = encode_bounded(v, shape, o);
        let twin = twin_encode(v, shape, o);
        match (cpu, twin) {
            (Ok(a), Ok(b)) => assert!(a == b, "{name} {o:?}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("{name} {o:?}: {:?} {:?}", a.err(), b.err()),
        }
        n += 1;
    });
    eprintln!("{n} encodes compared");
}

/// The size effect of the f32 bin rule against the f64 rule it replaced (`bound` accepted
/// with `<=` in f64, `c0` rounded half away from zero in f64, subnormals regular), on the
/// shared arrays at relative bounds 1e-2 to 1e-4, the axis set the estimate picks: prints
/// the total bytes and exceptions of both (run by hand: `--ignored --nocapture`).
#[cfg(feature = "dataset")]
#[test]
#[ignore]
fn size_effect_of_the_f32_bin_rule() {
    use super::candidate::{runs_of, unit_for, Candidate};
    use super::predict::differences_forward;
    use super::tokens::encode_chunks;
    let (mut old_total, mut new_total, mut old_exc, mut new_exc, mut raw) = (0, 0, 0, 0, 0);
    for (name, v, shape, fill, range) in shared_cases() {
        for rel in [1e-2, 1e-3, 1e-4] {
            let bound = rel * range;
            let o = BoundedOptions {
                fill_value: fill,
                predictor: Some(Predictor::Differences),
                ..BoundedOptions::new(bound)
            };
            let Ok(new) = encode_bounded(&v, &shape, &o) else {
                continue;
            };
            let h = parse_bounded(&new).unwrap();
            // The old rule.
            let special: Vec<bool> = v
                .iter()
                .map(|&x| !x.is_finite() || fill.is_some_and(|f| f.to_bits() == x.to_bits()))
                .collect();
            let (lo, hi) = v
                .iter()
                .zip(&special)
                .filter(|(_, &s)| !s)
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), (&x, _)| {
                    (a.min(x), b.max(x))
                });
            let off = if lo <= hi && !lo.is_subnormal() {
                lo
            } else {
                0.0
            };
            let width = unit_for(2.0 * bound, crate::field::BIN_WIDTH_BITS).unwrap();
            let mut q = vec![0u32; v.len()];
            let mut exc = Vec::new();
            let mut last = None;
            for (i, &x) in v.iter().enumerate() {
                let mut chosen = None;
                if !special[i] {
                    let c0 = ((x as f64 - off as f64) / width as f64).round();
                    for dq in [0.0, -1.0, 1.0] {
                        let c = c0 + dq;
                        if !(0.0..BOUNDED_MAX_BINS as f64).contains(&c) {
                            continue;
                        }
                        let r = off + c as f32 * width;
                        if !r.is_subnormal() && (r as f64 - x as f64).abs() <= bound {
                            chosen = Some(c as u32);
                            break;
                        }
                    }
                }
                match chosen {
                    Some(b) => {
                        q[i] = b;
                        last = Some(b);
                    }
                    None => {
                        exc.push(i);
                        q[i] = last.unwrap_or(0);
                    }
                }
            }
            if let Some(first) = (0..q.len()).find(|i| exc.binary_search(i).is_err()) {
                let b = q[first];
                q[..first].fill(b);
            }
            let (nruns, runs) = runs_of(&v, exc.into_iter()).unwrap();
            let z = differences_forward(q, &shape, h.axes[0]);
            let chunks = encode_chunks(&z, h.chunk_log2, h.segments as usize, true);
            let mut header = h.clone();
            header.offset = off;
            header.runs = nruns;
            header.runs_len = runs.len() as u32;
            let old = Candidate {
                header,
                runs,
                chunks,
            }
            .len();
            eprintln!(
                "{name:32} rel {rel:e}: old {old:9} B ({nruns} runs), new {:9} B ({} runs)",
                new.len(),
                h.runs
            );
            old_total += old;
            new_total += new.len();
            old_exc += nruns;
            new_exc += h.runs;
            raw += v.len() * 4;
        }
    }
    eprintln!(
        "total: raw {raw} B, old rule {old_total} B ({old_exc} runs), new rule {new_total} B ({new_exc} runs), new/old {:.5}",
        new_total as f64 / old_total as f64
    );
}
