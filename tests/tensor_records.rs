//! Tensor records in shards: raw and error-bounded round trips of every element type and
//! 1 to 4 axes, records of several arrays, the packer's statistics and resume, and hostile
//! index fields, payloads and truncations (each an error, never a panic or a wrong array).

use std::collections::BTreeMap;
use std::path::Path;

use l3::decode::DecodeOptions;
use l3::field::Bound;
use l3::shard::format::{HEADER_LEN, TRAILER_LEN};
use l3::shard::tensor_format::parse_tensor_shard;
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::shard::{
    Dataset, RecordKind, ShardReader, TensorDataset, TensorRecordInput, TensorShardReader,
    TensorShardWriter,
};
use l3::tensor::{
    check_payload, decode_array, decode_array_window, encode_array, ArrayMode, ArrayOptions,
    BoundedFormat, DType, EncodedArray, NdArray, StorageMode, DTYPES,
};
use l3::Error;

/// A deterministic array of `dtype` and `shape`: every byte pattern varies, floats are finite
/// and smooth-ish (so raw bytes and values both get exercised).
fn array(dtype: DType, shape: &[u32], seed: u32) -> NdArray {
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let mut bytes = Vec::with_capacity(n * dtype.size());
    for i in 0..n {
        let x = (i as f64 * 0.37 + seed as f64).sin() * 100.0;
        match dtype {
            DType::Float32 => bytes.extend_from_slice(&(x as f32).to_le_bytes()),
            DType::Float64 => bytes.extend_from_slice(&x.to_le_bytes()),
            DType::Float16 => bytes.extend_from_slice(&(0x3C00u16 + (i as u16 * 7)).to_le_bytes()),
            DType::BFloat16 => {
                bytes.extend_from_slice(&(((x as f32).to_bits() >> 16) as u16).to_le_bytes())
            }
            _ => {
                let v = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed as u64;
                bytes.extend_from_slice(&v.to_le_bytes()[..dtype.size()]);
            }
        }
    }
    NdArray::new(dtype, shape.to_vec(), bytes).unwrap()
}

fn raw() -> ArrayOptions {
    ArrayOptions {
        mode: ArrayMode::Raw,
        fill_value: None,
        format: Default::default(),
    }
}

fn write_shard(path: &Path, records: Vec<TensorRecordInput>) -> Vec<u8> {
    let mut w = TensorShardWriter::new();
    for r in records {
        w.add(r).unwrap();
    }
    w.write_to(path).unwrap();
    std::fs::read(path).unwrap()
}

/// `e` written as the one array of a one-record shard at `path` and read back from it.
fn through_a_shard(path: &Path, e: &EncodedArray) -> NdArray {
    write_shard(
        path,
        vec![TensorRecordInput {
            key: "f".into(),
            class: None,
            meta: vec![],
            arrays: vec![e.clone()],
        }],
    );
    let shard = TensorShardReader::open(path, 1 << 20).unwrap();
    shard.read_record(0, &DecodeOptions::default()).unwrap()[0]
        .1
        .clone()
}

#[test]
fn every_dtype_and_rank_round_trips_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let shapes: [&[u32]; 4] = [&[7], &[3, 5], &[2, 3, 4], &[2, 1, 3, 2]];
    let mut records = Vec::new();
    let mut sources = Vec::new();
    for (k, &dtype) in DTYPES.iter().enumerate() {
        let arrays: Vec<NdArray> = shapes
            .iter()
            .enumerate()
            .map(|(j, s)| array(dtype, s, (k * 4 + j) as u32))
            .collect();
        let encoded = arrays
            .iter()
            .enumerate()
            .map(|(j, a)| encode_array(&format!("a{j}"), a, &raw()).unwrap())
            .collect();
        records.push(TensorRecordInput {
            key: format!("{}/rec", dtype.name()),
            class: Some(k as u32),
            meta: vec![k as u8; k],
            arrays: encoded,
        });
        sources.push(arrays);
    }
    let path = tmp.path().join("t.l3s");
    let bytes = write_shard(&path, records);
    let (_, entries) = parse_tensor_shard(&bytes).unwrap();
    assert_eq!(entries.len(), DTYPES.len());
    let shard = TensorShardReader::open(&path, 1 << 20).unwrap();
    for (i, arrays) in sources.iter().enumerate() {
        let e = shard.entry(i).unwrap();
        assert_eq!(e.class, Some(i as u32));
        assert_eq!(e.meta, vec![i as u8; i]);
        let got = shard.read_record(i, &DecodeOptions::default()).unwrap();
        assert_eq!(got.len(), 4);
        for (j, ((name, a), src)) in got.iter().zip(arrays).enumerate() {
            assert_eq!(name, &format!("a{j}"));
            assert_eq!(a, src, "{} shape {:?}", src.dtype().name(), src.shape());
            assert_eq!(e.arrays[j].spec.mode, StorageMode::Raw);
        }
    }
}

/// A float32 field with NaN, an infinity and fill values, within `bound` after a round trip.
#[test]
fn error_bounded_arrays_are_within_their_bound_and_exact_where_they_must_be() {
    let tmp = tempfile::tempdir().unwrap();
    for shape in [vec![24u32, 31], vec![3, 17, 9], vec![400], vec![2, 3, 7, 9]] {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let mut values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.05).sin() * 3.0).collect();
        values[5] = f32::NAN;
        values[6] = f32::NEG_INFINITY;
        values[7] = -9999.0;
        values[n - 1] = -9999.0;
        let src = NdArray::from_f32(shape.clone(), &values).unwrap();
        for mode in [
            ArrayMode::Bounded(Bound::Absolute(1e-3)),
            ArrayMode::Bounded(Bound::Relative(1e-2)),
        ] {
            let opts = ArrayOptions {
                mode,
                fill_value: Some(-9999.0),
                format: Default::default(),
            };
            let e = encode_array("field", &src, &opts).unwrap();
            assert_eq!(e.spec.mode, StorageMode::ErrorBounded);
            // 2 or 3 axes: version 1 (decodes on the GPU too); 1 or 4: version 3.
            let version = if matches!(shape.len(), 2 | 3) { 1 } else { 3 };
            assert_eq!(l3::field::field_version(&e.payload), Some(version));
            let bound = match mode {
                ArrayMode::Bounded(Bound::Absolute(b)) => b,
                _ => 1e-2 * 6.0,
            };
            assert!(
                e.spec.bound <= bound * 1.0001 && e.spec.bound > 0.0,
                "{}",
                e.spec.bound
            );
            let path = tmp.path().join("f.l3s");
            let got = &through_a_shard(&path, &e);
            let got = got.to_f32().unwrap();
            for (i, (&s, &d)) in values.iter().zip(&got).enumerate() {
                if !s.is_finite() || s == -9999.0 {
                    assert_eq!(s.to_bits(), d.to_bits(), "element {i}");
                } else {
                    assert!((s as f64 - d as f64).abs() <= e.spec.bound, "element {i}");
                }
            }
        }
    }
    // Other types and ranks are refused clearly.
    let f64s = array(DType::Float64, &[4, 4], 0);
    let abs = ArrayOptions {
        mode: ArrayMode::Bounded(Bound::Absolute(0.1)),
        fill_value: None,
        format: Default::default(),
    };
    assert!(matches!(
        encode_array("x", &f64s, &abs),
        Err(Error::Parameter(_))
    ));
    // A constant array under a relative bound is stored exactly.
    let flat = NdArray::from_f32(vec![4, 4], &[2.5; 16]).unwrap();
    let rel = ArrayOptions {
        mode: ArrayMode::Bounded(Bound::Relative(1e-3)),
        fill_value: None,
        format: Default::default(),
    };
    let e = encode_array("c", &flat, &rel).unwrap();
    let d = decode_array(&e.spec, &e.payload, &DecodeOptions::default()).unwrap();
    assert_eq!(d, flat);
    // So is one of 1 axis (version 3), and one whose only regular value sits among NaNs.
    let mut values = vec![f32::NAN; 40];
    values[3] = -7.25;
    for v in [vec![2.5f32; 40], values] {
        let flat = NdArray::from_f32(vec![40], &v).unwrap();
        let e = encode_array("c", &flat, &rel).unwrap();
        assert_eq!(l3::field::field_version(&e.payload), Some(3));
        let d = decode_array(&e.spec, &e.payload, &DecodeOptions::default()).unwrap();
        assert_eq!(d, flat);
    }
}

/// A bound too fine for the field formats' bins (a range of ~2e6 at 1e-4): the array is
/// stored exactly, its index entry says lossless, and it reads back bit for bit from a shard,
/// for 2 and 3 axes (version 1's encoder) and 1 and 4 (version 3's).
#[test]
fn a_bound_too_fine_for_the_bins_is_stored_exactly_and_indexed_lossless() {
    let tmp = tempfile::tempdir().unwrap();
    for shape in [vec![24u32, 31], vec![3, 17, 9], vec![400], vec![2, 3, 7, 9]] {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let mut values: Vec<f32> = (0..n).map(|i| (i as f32 * 0.05).sin() * 1e6).collect();
        values[5] = f32::NAN;
        values[7] = -9999.0;
        let src = NdArray::from_f32(shape.clone(), &values).unwrap();
        let opts = ArrayOptions {
            mode: ArrayMode::Bounded(Bound::Absolute(1e-4)),
            fill_value: Some(-9999.0),
            format: Default::default(),
        };
        let e = encode_array("field", &src, &opts).unwrap();
        assert_eq!(e.spec.mode, StorageMode::Lossless, "{shape:?}");
        assert_eq!(l3::field::field_version(&e.payload), Some(2));
        let path = tmp.path().join("f.l3s");
        let got = &through_a_shard(&path, &e);
        assert_eq!(got.bytes(), src.bytes(), "{shape:?}");
    }
}

#[test]
fn lossless_floats_round_trip_bit_exact_and_other_types_stay_raw() {
    let lossless = ArrayOptions {
        mode: ArrayMode::Lossless,
        fill_value: None,
        format: Default::default(),
    };
    for dtype in [DType::Float32, DType::Float16, DType::BFloat16] {
        for shape in [&[300][..], &[12, 10], &[3, 12, 10], &[2, 3, 4, 5]] {
            let mut a = array(dtype, shape, 3);
            // NaN with a payload, -0.0 and infinity, in the dtype's width.
            let specials: [u64; 3] = match dtype {
                DType::Float32 => [0x7FC0_1234, 0x8000_0000, 0x7F80_0000],
                _ => [0x7E01, 0x8000, 0x7C00],
            };
            let mut bytes = a.bytes().to_vec();
            for (k, bits) in specials.iter().enumerate() {
                let at = k * 7 * dtype.size();
                bytes[at..at + dtype.size()].copy_from_slice(&bits.to_le_bytes()[..dtype.size()]);
            }
            a = NdArray::new(dtype, shape.to_vec(), bytes).unwrap();
            let e = encode_array("x", &a, &lossless).unwrap();
            assert_eq!(e.spec.mode, StorageMode::Lossless, "{dtype:?} {shape:?}");
            assert_eq!(&e.payload[..8], b"\x89L3F\r\n\x1a\n");
            let d = decode_array(&e.spec, &e.payload, &DecodeOptions::default()).unwrap();
            assert_eq!(d, a, "{dtype:?} {shape:?}");
        }
    }
    // An index entry whose type or shape disagrees with the lossless field is refused.
    let a = array(DType::Float32, &[6, 5], 2);
    let e = encode_array("x", &a, &lossless).unwrap();
    let mut wrong_shape = e.spec.clone();
    wrong_shape.shape = vec![5, 6];
    let err = decode_array(&wrong_shape, &e.payload, &DecodeOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Format(_)), "{err}");
    let mut wrong_type = e.spec.clone();
    wrong_type.dtype = DType::Float16;
    wrong_type.shape = vec![6, 10];
    let err = decode_array(&wrong_type, &e.payload, &DecodeOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Format(_)), "{err}");
    // Integers and float64 have no lossless float field: their bytes are stored.
    for dtype in [DType::Int16, DType::Float64] {
        let other = array(dtype, &[8, 8], 1);
        let e = encode_array("x", &other, &lossless).unwrap();
        assert_eq!(e.spec.mode, StorageMode::Raw);
        assert_eq!(e.payload, other.bytes());
    }
}

fn sample(i: u32) -> TensorSample {
    let mut target: Vec<f32> = (0..2 * 6 * 5)
        .map(|k| ((k as f32 + i as f32 * 3.0) * 0.1).cos())
        .collect();
    target[3] = -1.0; // the fill value of "target"
    target[4] = f32::NAN;
    TensorSample {
        key: None,
        class: Some(i % 3),
        meta: format!("{{\"t\": {i}}}").into_bytes(),
        arrays: vec![
            ("input".into(), array(DType::Float32, &[3, 6, 5], i)),
            (
                "target".into(),
                NdArray::from_f32(vec![2, 6, 5], &target).unwrap(),
            ),
            ("mask".into(), array(DType::UInt8, &[6, 5], i)),
            ("half".into(), array(DType::Float16, &[10], i)),
        ],
    }
}

fn options(per_shard: usize) -> TensorPackOptions {
    let mut o = TensorPackOptions::new(per_shard, ArrayMode::Raw);
    o.modes.insert(
        "target".into(),
        ArrayOptions {
            mode: ArrayMode::Bounded(Bound::Absolute(1e-4)),
            fill_value: Some(-1.0),
            format: Default::default(),
        },
    );
    o
}

fn pack(
    dir: &Path,
    samples: impl IntoIterator<Item = TensorSample>,
    o: TensorPackOptions,
) -> l3::Result<l3::shard::tensor_pack::TensorPackSummary> {
    let mut p = TensorPacker::new(dir, o)?;
    for s in samples {
        p.push(s)?;
    }
    p.finish()
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn packed_multi_array_records_read_back_with_exact_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let summary = pack(&ds, (0..11).map(sample), options(4)).unwrap();
    assert_eq!(
        (
            summary.records,
            summary.shards,
            summary.written,
            summary.kept
        ),
        (11, 3, 3, 0)
    );
    assert_eq!(l3::shard::dataset_kind(&ds).unwrap(), RecordKind::Tensors);
    let d = TensorDataset::open(&ds).unwrap();
    // Opened as a dataset of either kind, from one read of the manifest: the same records.
    match l3::shard::AnyDataset::open(&ds).unwrap() {
        l3::shard::AnyDataset::Tensors(any) => {
            assert_eq!((any.len(), any.manifest()), (d.len(), d.manifest()))
        }
        l3::shard::AnyDataset::Images(_) => panic!("a tensor dataset opened as images"),
    }
    assert_eq!(d.len(), 11);
    let m = d.manifest();
    let names: Vec<&str> = m.arrays.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["input", "target", "mask", "half"]);
    assert_eq!(m.arrays[1].mode, "error-bounded");
    for i in 0..11u32 {
        let src = sample(i);
        let got = d.read(i as u64).unwrap();
        let e = d.entry(i as u64).unwrap();
        assert_eq!(e.key, format!("{i:08}"));
        assert_eq!(e.class, Some(i % 3));
        assert_eq!(got[0], src.arrays[0]);
        assert_eq!(got[2], src.arrays[2]);
        assert_eq!(got[3], src.arrays[3]);
        let (t, s) = (
            got[1].1.to_f32().unwrap(),
            src.arrays[1].1.to_f32().unwrap(),
        );
        for (a, b) in t.iter().zip(&s) {
            assert!(a.to_bits() == b.to_bits() || (a - b).abs() as f64 <= 1e-4);
        }
    }
    // Statistics: every finite, non-fill value of each float array, in one f64 two-pass sum.
    for (name, fill) in [("input", None), ("target", Some(-1.0f32)), ("half", None)] {
        let k = names.iter().position(|n| *n == name).unwrap();
        let values: Vec<f64> = (0..11)
            .flat_map(|i| {
                let a = &sample(i).arrays[k].1;
                (0..a.len())
                    .map(|j| a.float_at(j).unwrap())
                    .collect::<Vec<_>>()
            })
            .filter(|v| v.is_finite() && fill.is_none_or(|f| *v != f as f64))
            .collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let std =
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt();
        let s = m.stats[name];
        assert_eq!(s.count, values.len() as u64, "{name}");
        assert!(
            (s.mean - mean).abs() <= 1e-12 * mean.abs().max(1.0),
            "{name}: {} {mean}",
            s.mean
        );
        assert!(
            (s.std - std).abs() <= 1e-12 * std,
            "{name}: {} {std}",
            s.std
        );
    }
    assert!(!m.stats.contains_key("mask"));
    // The image reader says what the dataset is.
    let err = Dataset::open(&ds).unwrap_err().to_string();
    assert!(err.contains("tensor dataset"), "{err}");
    let err = ShardReader::open(&ds.join("shard-00000.l3s"), 1 << 20)
        .unwrap_err()
        .to_string();
    assert!(err.contains("tensor shard"), "{err}");
}

#[test]
fn a_rerun_keeps_finished_shards_and_refuses_other_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    pack(&ds, (0..10).map(sample), options(4)).unwrap();
    let before = files(&ds);
    // Same samples and options: everything kept, byte-identical.
    let again = pack(&ds, (0..10).map(sample), options(4)).unwrap();
    assert_eq!((again.written, again.kept), (0, 3));
    assert_eq!(files(&ds), before);
    // An interrupted run (a shard missing, its sidecar there): only that shard is written.
    std::fs::remove_file(ds.join("shard-00001.l3s")).unwrap();
    let resumed = pack(&ds, (0..10).map(sample), options(4)).unwrap();
    assert_eq!((resumed.written, resumed.kept), (1, 2));
    assert_eq!(files(&ds), before);
    // Another sample: refused, naming the shard and the sample; nothing changes.
    let changed = (0..10).map(|i| if i == 6 { sample(60) } else { sample(i) });
    let err = pack(&ds, changed, options(4)).unwrap_err().to_string();
    assert!(
        err.contains("shard-00001.l3s") && err.contains("sample 6"),
        "{err}"
    );
    assert_eq!(files(&ds), before);
    // Other options: refused.
    let err = pack(
        &ds,
        (0..10).map(sample),
        TensorPackOptions::new(4, ArrayMode::Raw),
    )
    .unwrap_err();
    assert!(err.to_string().contains("other options"), "{err}");
    // Fewer samples: the last shard differs.
    assert!(pack(&ds, (0..9).map(sample), options(4)).is_err());
    // Fewer samples on a shard boundary: the manifest differs.
    let err = pack(&ds, (0..8).map(sample), options(4))
        .unwrap_err()
        .to_string();
    assert!(err.contains("manifest.json"), "{err}");
    assert_eq!(files(&ds), before);
    // With force: written.
    let mut forced = options(4);
    forced.force = true;
    let changed = (0..10).map(|i| if i == 6 { sample(60) } else { sample(i) });
    let s = pack(&ds, changed, forced).unwrap();
    assert_eq!((s.written, s.kept), (1, 2));
    assert_ne!(files(&ds), before);
}

#[test]
fn samples_that_differ_from_the_first_are_refused_by_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mut p = TensorPacker::new(tmp.path(), options(4)).unwrap();
    p.push(sample(0)).unwrap();
    let mut bad = sample(1);
    bad.arrays[0].1 = array(DType::Float32, &[3, 6, 4], 1);
    let err = p.push(bad).unwrap_err();
    assert!(matches!(&err, Error::Record { sample: 1, .. }), "{err}");
    assert!(err.to_string().contains("shape"), "{err}");
    let mut bad = sample(1);
    bad.arrays.pop();
    assert!(p.push(bad).is_err());
    let mut bad = sample(1);
    bad.arrays[2].1 = array(DType::Int8, &[6, 5], 1);
    assert!(p.push(bad).unwrap_err().to_string().contains("dtype"));
}

/// A one-record, one-array shard and where each index field of its array lies.
struct Forged {
    bytes: Vec<u8>,
    index_offset: usize,
    /// Start of the array entry (its name_len byte), from the index start.
    array_at: usize,
}

fn forged(spec_array: &NdArray, opts: &ArrayOptions) -> Forged {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("x.l3s");
    let e = encode_array("v", spec_array, opts).unwrap();
    let bytes = write_shard(
        &path,
        vec![TensorRecordInput {
            key: "k".into(),
            class: None,
            meta: vec![],
            arrays: vec![e],
        }],
    );
    let t = bytes.len() - TRAILER_LEN as usize;
    let index_offset = u64::from_le_bytes(bytes[t..t + 8].try_into().unwrap()) as usize;
    // key_len 2 + key 1 + class 4 + meta_len 4 + count 1 + reserved 1.
    Forged {
        bytes,
        index_offset,
        array_at: 13,
    }
}

impl Forged {
    /// The shard with `patch` applied at `at` bytes into the array entry, the index CRC fixed.
    fn with(&self, at: usize, patch: &[u8]) -> Vec<u8> {
        let mut b = self.bytes.clone();
        let o = self.index_offset + self.array_at + at;
        b[o..o + patch.len()].copy_from_slice(patch);
        let t = b.len() - TRAILER_LEN as usize;
        let crc = crc32fast::hash(&b[self.index_offset..t]);
        b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

#[test]
fn hostile_index_fields_are_errors() {
    let f = forged(&array(DType::Int16, &[3, 4], 0), &raw());
    assert!(parse_tensor_shard(&f.bytes).is_ok());
    // Array entry: name_len 1 | name "v" | dtype | ndim | mode | flags | shape 2x4 | bound 8
    // | fill 8 | offset 8 | len 8 | crc 4.
    let cases: &[(usize, &[u8], &str)] = &[
        (0, &[0], "array name"),
        (1, b"/", "array name"),
        (2, &[0], "array dtype"),
        (2, &[13], "array dtype"),
        (3, &[0], "array ndim"),
        (3, &[5], "array ndim"),
        (4, &[3], "array mode"),
        (4, &[2], "array bound"),
        (5, &[2], "array flags"),
        (6, &[0, 0, 0, 0], "array shape"),
        (6, &[4, 0, 0, 0], "array len"),
        (14, &1e-3f64.to_le_bytes(), "array bound"),
        (22, &[1], "array fill"),
        (30, &[0xFF], "expected to start at"),
        (38, &[25], "array len"),
    ];
    for &(at, patch, what) in cases {
        let bad = f.with(at, patch);
        let err = parse_tensor_shard(&bad).expect_err(what).to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    // A fill value with the flag, of the right width, is fine; wider than the type is not.
    let ok = f.with(5, &[1]);
    let ok = {
        let mut b = ok;
        let o = f.index_offset + f.array_at + 22;
        b[o..o + 8].copy_from_slice(&0xFFFFu64.to_le_bytes());
        let t = b.len() - TRAILER_LEN as usize;
        let crc = crc32fast::hash(&b[f.index_offset..t]);
        b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
        b
    };
    assert!(parse_tensor_shard(&ok).is_ok());
    let wide = Forged { bytes: ok, ..f };
    assert!(parse_tensor_shard(&wide.with(22, &0x1_0000u64.to_le_bytes())).is_err());
    // Record-level fields: array count 0 and 17, the reserved byte.
    for (at, v) in [(11usize, 0u8), (11, 17), (12, 1)] {
        let mut b = wide.bytes.clone();
        b[wide.index_offset + at] = v;
        let t = b.len() - TRAILER_LEN as usize;
        let crc = crc32fast::hash(&b[wide.index_offset..t]);
        b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
        assert!(parse_tensor_shard(&b).is_err(), "byte {at} = {v}");
    }
}

#[test]
fn every_truncation_and_flip_is_an_error_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("x.l3s");
    let s = sample(2);
    let mut o = options(4);
    o.samples_per_shard = 1;
    let arrays = s
        .arrays
        .iter()
        .map(|(n, a)| encode_array(n, a, o.modes.get(n).unwrap_or(&raw())).unwrap())
        .collect();
    let bytes = write_shard(
        &path,
        vec![TensorRecordInput {
            key: "a/b".into(),
            class: Some(1),
            meta: b"m".to_vec(),
            arrays,
        }],
    );
    for n in 0..bytes.len() {
        assert!(parse_tensor_shard(&bytes[..n]).is_err(), "{n} bytes");
        std::fs::write(&path, &bytes[..n]).unwrap();
        assert!(TensorShardReader::open(&path, 1 << 20).is_err());
    }
    // Flips in the index with its CRC fixed, and in the payloads: an error or a record that
    // reads as its checks allow; never a panic.
    let t = bytes.len() - TRAILER_LEN as usize;
    let index_offset = u64::from_le_bytes(bytes[t..t + 8].try_into().unwrap()) as usize;
    for pos in HEADER_LEN as usize..t {
        let mut b = bytes.clone();
        b[pos] ^= 0x5A;
        let crc = crc32fast::hash(&b[index_offset..t]);
        b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, &b).unwrap();
        if let Ok(r) = TensorShardReader::open(&path, 1 << 20) {
            if pos < index_offset {
                // A payload byte: its CRC-32 catches it.
                assert!(
                    r.read_record(0, &DecodeOptions::default()).is_err(),
                    "byte {pos}"
                );
            } else if let Ok(arrays) = r.read_record(0, &DecodeOptions::default()) {
                // What reads is what the (forged) index says, exactly.
                for ((name, a), x) in arrays.iter().zip(&r.entry(0).unwrap().arrays) {
                    assert_eq!(name, &x.spec.name);
                    assert_eq!(a.shape(), x.spec.shape.as_slice(), "byte {pos}");
                    assert_eq!(a.bytes().len() as u64, x.spec.byte_len(), "byte {pos}");
                }
            }
        }
    }
}

#[test]
fn a_field_payload_that_disagrees_with_its_entry_is_a_format_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("x.l3s");
    let src = array(DType::Float32, &[4, 8], 3);
    let opts = ArrayOptions {
        mode: ArrayMode::Bounded(Bound::Absolute(1e-2)),
        fill_value: None,
        format: Default::default(),
    };
    let good = encode_array("v", &src, &opts).unwrap();
    let mut bads = Vec::new();
    // Both field versions a 2-axis array may have: the same element count, another shape;
    // another bound; a fill the field lacks.
    for format in [BoundedFormat::V1, BoundedFormat::V3] {
        let e = encode_array("v", &src, &ArrayOptions { format, ..opts }).unwrap();
        let mut shape = e.clone();
        shape.spec.shape = vec![8, 4];
        let mut bound = e.clone();
        bound.spec.bound *= 2.0;
        let mut fill = e.clone();
        fill.spec.fill = Some(0);
        bads.extend([shape, bound, fill]);
    }
    // A version 1 payload under a 1-axis entry (1 and 4 axes are version 3), and a 1-axis
    // version 3 payload under a 2-axis entry (refused by its shape).
    let mut version = good.clone();
    version.spec.shape = vec![32];
    let mut v3 = encode_array("v", &array(DType::Float32, &[32], 3), &opts).unwrap();
    v3.spec.shape = vec![4, 8];
    bads.extend([version, v3]);
    for bad in bads {
        let mut w = TensorShardWriter::new();
        let rec = TensorRecordInput {
            key: "k".into(),
            class: None,
            meta: vec![],
            arrays: vec![bad.clone()],
        };
        // The writer refuses it...
        assert!(matches!(w.add(rec.clone()), Err(Error::Format(_))));
        // ... and a reader of a shard that has it anyway (forged) gives a FormatError.
        let err = decode_array(&bad.spec, &bad.payload, &DecodeOptions::default()).unwrap_err();
        assert!(matches!(err, Error::Format(_)), "{err}");
    }
    // Limits come before any allocation.
    let small = DecodeOptions {
        limits: l3::Limits {
            max_output_bytes: 64,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode_array(&good.spec, &good.payload, &small),
        Err(Error::Limits(_))
    ));
    write_shard(
        &path,
        vec![TensorRecordInput {
            key: "k".into(),
            class: None,
            meta: vec![],
            arrays: vec![good],
        }],
    );
    let r = TensorShardReader::open_with_limits(
        &path,
        1 << 20,
        &l3::Limits {
            max_input_bytes: 16,
            ..Default::default()
        },
    );
    assert!(r.is_err() || r.unwrap().read_payload(0, 0).is_err());
}

/// `BoundedFormat::V3` stores an error-bounded array of 2 or 3 axes as a `.l3f` version 3
/// field (the default, version 1, as before): both read back from a shard within the bound,
/// a window decode equals the whole decode inside the window, and a version 1 payload is
/// still refused for 1 or 4 axes.
#[test]
fn error_bounded_arrays_of_2_or_3_axes_take_either_field_version() {
    let tmp = tempfile::tempdir().unwrap();
    let bound = 1e-2;
    for shape in [vec![40u32, 33], vec![3, 20, 17]] {
        let n: usize = shape.iter().map(|&d| d as usize).product();
        let mut values: Vec<f32> = (0..n)
            .map(|i| ((i % 33) as f32 * 0.2).sin() * 5.0 + (i / 33) as f32 * 0.01)
            .collect();
        values[3] = f32::NAN;
        values[11] = -9999.0;
        let src = NdArray::from_f32(shape.clone(), &values).unwrap();
        let mut sizes = Vec::new();
        for (format, version) in [(BoundedFormat::V1, 1), (BoundedFormat::V3, 3)] {
            let opts = ArrayOptions {
                mode: ArrayMode::Bounded(Bound::Absolute(bound)),
                fill_value: Some(-9999.0),
                format,
            };
            let e = encode_array("field", &src, &opts).unwrap();
            assert_eq!(e.spec.mode, StorageMode::ErrorBounded, "{shape:?}");
            assert_eq!(l3::field::field_version(&e.payload), Some(version));
            sizes.push(e.payload.len());
            let path = tmp.path().join(format!("f{version}.l3s"));
            let got = &through_a_shard(&path, &e);
            let got = got.to_f32().unwrap();
            for (i, (&a, &b)) in values.iter().zip(&got).enumerate() {
                if a.is_nan() || a == -9999.0 {
                    assert_eq!(a.to_bits(), b.to_bits(), "{shape:?} v{version} at {i}");
                } else {
                    assert!((a - b).abs() as f64 <= bound, "{shape:?} v{version} at {i}");
                }
            }
            // (Version 3 decodes whole: its window check is the whole decode's.)
            let window = Some((5..17, 3..20));
            let part = decode_array_window(&e.spec, &e.payload, &DecodeOptions::default(), window)
                .unwrap()
                .to_f32()
                .unwrap();
            let (rows, cols) = (
                shape[shape.len() - 2] as usize,
                shape[shape.len() - 1] as usize,
            );
            for (i, (&w, &g)) in part.iter().zip(&got).enumerate() {
                let (y, x) = ((i / cols) % rows, i % cols);
                if (5..17).contains(&y) && (3..20).contains(&x) {
                    assert_eq!(
                        w.to_bits(),
                        g.to_bits(),
                        "{shape:?} v{version} window at {i}"
                    );
                }
            }
        }
        // The smooth field is smaller in version 3.
        assert!(sizes[1] < sizes[0], "{shape:?}: {sizes:?}");
    }
    // A version 1 payload under a 1-axis entry: refused, naming the version.
    let flat = NdArray::from_f32(vec![40, 33], &vec![1.5f32; 40 * 33]).unwrap();
    let opts = ArrayOptions {
        mode: ArrayMode::Bounded(Bound::Absolute(1e-2)),
        fill_value: None,
        format: BoundedFormat::V1,
    };
    let mut e = encode_array("f", &flat, &opts).unwrap();
    assert_eq!(l3::field::field_version(&e.payload), Some(1));
    e.spec.shape = vec![40 * 33];
    let err = check_payload(&e.spec, &e.payload).unwrap_err();
    assert!(err.to_string().contains("field version"), "{err}");
}

/// A dataset where one record's error-bounded array fell back to lossless (its bound too
/// fine for the bins there) opens and reads back: before, opening it failed with "its arrays
/// are not the manifest's".
#[test]
fn a_dataset_with_an_array_stored_exactly_for_a_too_fine_bound_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    let mut p = TensorPacker::new(
        &out,
        TensorPackOptions::new(2, ArrayMode::Bounded(Bound::Absolute(1e-3))),
    )
    .unwrap();
    let mut wanted = Vec::new();
    for i in 0..3u32 {
        // Sample 1 spans 2e4 (2e7 bins at 1e-3): stored exactly.
        let scale = if i == 1 { 1e4 } else { 1.0 };
        let v: Vec<f32> = (0..24 * 31)
            .map(|k| (k as f32 * 0.05 + i as f32).sin() * scale)
            .collect();
        let a = NdArray::from_f32(vec![24, 31], &v).unwrap();
        wanted.push(v);
        p.push(TensorSample {
            key: None,
            class: None,
            meta: vec![],
            arrays: vec![("x".into(), a)],
        })
        .unwrap();
    }
    p.finish().unwrap();
    let ds = TensorDataset::open(&out).unwrap();
    let modes: Vec<StorageMode> = (0..3).map(|i| ds.arrays_of(i).unwrap()[0].0.mode).collect();
    assert_eq!(
        modes,
        [
            StorageMode::ErrorBounded,
            StorageMode::Lossless,
            StorageMode::ErrorBounded
        ]
    );
    for (i, v) in wanted.iter().enumerate() {
        let got = ds.read_sample(i as u64).unwrap();
        let got = got[0].1.to_f32().unwrap();
        for (&a, &b) in v.iter().zip(&got) {
            if i == 1 {
                assert_eq!(a.to_bits(), b.to_bits());
            } else {
                assert!((a - b).abs() <= 1e-3);
            }
        }
    }
}
