//! `l3 ls`, `verify-dataset` and `unpack` on a tensor dataset (packed with the library's
//! `TensorPacker`): the arrays listed, every array checked and a damaged one named, the
//! arrays written as `.npy` files whose header bytes and elements are checked exactly.

mod support;

use std::path::Path;

use l3::field::Bound;
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::tensor::{ArrayMode, ArrayOptions, DType, NdArray};
use support::{l3, s, text};

fn sample(i: u32) -> TensorSample {
    let input: Vec<f32> = (0..3 * 6 * 5)
        .map(|k| (k as f32 * 0.3 + i as f32).sin())
        .collect();
    let target: Vec<f32> = (0..6 * 5)
        .map(|k| (k as f32 * 0.1 - i as f32).cos())
        .collect();
    let labels: Vec<u8> = (0..7u8).map(|k| k.wrapping_mul(i as u8 + 3)).collect();
    TensorSample {
        key: Some(format!("run{}/t{i:04}", i % 2)),
        class: Some(i % 2),
        meta: vec![],
        arrays: vec![
            (
                "input".into(),
                NdArray::from_f32(vec![3, 6, 5], &input).unwrap(),
            ),
            (
                "target".into(),
                NdArray::from_f32(vec![6, 5], &target).unwrap(),
            ),
            (
                "labels".into(),
                NdArray::new(DType::UInt8, vec![7], labels).unwrap(),
            ),
        ],
    }
}

fn pack(dir: &Path, n: u32) {
    let mut o = TensorPackOptions::new(3, ArrayMode::Raw);
    o.modes.insert(
        "target".into(),
        ArrayOptions {
            mode: ArrayMode::Bounded(Bound::Absolute(1e-3)),
            fill_value: None,
            format: Default::default(),
        },
    );
    let mut p = TensorPacker::new(dir, o).unwrap();
    for i in 0..n {
        p.push(sample(i)).unwrap();
    }
    p.finish().unwrap();
}

#[test]
fn ls_shows_arrays_and_records() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    pack(&ds, 5);
    let o = l3(&["ls", s(&ds)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("5 tensor records in 2 shard(s), 3 array(s) each"),
        "{out}"
    );
    assert!(out.contains("array input float32 [3, 6, 5] raw:"), "{out}");
    assert!(
        out.contains("array target float32 [6, 5] error-bounded bound absolute 1e-3"),
        "{out}"
    );
    assert!(out.contains("array labels uint8 [7] raw:"), "{out}");
    assert!(out.contains("stats: count 450 mean"), "{out}");
    let o = l3(&["ls", "--records", s(&ds)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("shard-00001.l3s #1 run0/t0004 class 0: input float32 [3, 6, 5] raw (360 B)"),
        "{out}"
    );
}

/// A windowed dataset (one record per step, samples over them): `ls` shows its window and
/// the statistics per sample array; `verify-dataset` checks every record.
#[test]
fn ls_and_verify_show_a_windowed_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let mut o = TensorPackOptions::new(3, ArrayMode::Raw);
    o.window = vec![
        ("x".into(), "input".into(), 0),
        ("y".into(), "target".into(), 1),
    ];
    let mut p = TensorPacker::new(&ds, o).unwrap();
    for i in 0..5 {
        p.push(sample(i)).unwrap();
    }
    p.finish().unwrap();
    let o = l3(&["ls", s(&ds)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("5 tensor records in 2 shard(s)"), "{out}");
    assert!(
        out.contains("4 samples, each a window over the records"),
        "{out}"
    );
    assert!(out.contains("sample array y = target at +1"), "{out}");
    assert!(out.contains("stats: count 120 mean"), "{out}");
    let o = l3(&["verify-dataset", s(&ds)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
}

#[test]
fn verify_checks_every_array_and_names_a_damaged_one() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    pack(&ds, 5);
    let o = l3(&["verify-dataset", s(&ds)]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("5 tensor records (15 arrays) in 2 shard(s) decoded, 0 shard(s) failed"),
        "{out}"
    );
    assert!(
        out.contains("5 error-bounded array(s)") && out.contains("needs the source (not checked)"),
        "{out}"
    );
    // One byte of record 1's first payload (input: 360 bytes after record 0's 3 arrays).
    let shard = ds.join("shard-00000.l3s");
    let mut b = std::fs::read(&shard).unwrap();
    let target0 = l3::shard::TensorShardReader::open(&shard, 1 << 20)
        .unwrap()
        .entries()[1]
        .arrays[0]
        .payload
        .offset;
    b[target0 as usize + 10] ^= 1;
    std::fs::write(&shard, &b).unwrap();
    let o = l3(&["verify-dataset", s(&ds)]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("shard-00000.l3s: record 1 (key \"run1/t0001\"): array \"input\""),
        "{out}"
    );
    assert!(out.contains("checksum mismatch"), "{out}");
    assert!(out.contains("crc32: the shard has"), "{out}");
}

/// The `.npy` header for `descr` and `shape`, as NumPy 1.0 writes it.
fn npy_header(descr: &str, shape: &str) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = (10 + dict.len() + 1).next_multiple_of(64);
    let mut h = b"\x93NUMPY\x01\x00".to_vec();
    h.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(total - 1, b' ');
    h.push(b'\n');
    h
}

#[test]
fn unpack_writes_npy_files_and_refuses_to_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let (ds, out) = (tmp.path().join("ds"), tmp.path().join("out"));
    pack(&ds, 4);
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("unpacked 12 arrays of 4 records"),
        "{}",
        text(&o)
    );
    for i in 0..4 {
        let src = sample(i);
        let dir = out.join(format!("run{}/t{i:04}", i % 2));
        let input = std::fs::read(dir.join("input.npy")).unwrap();
        let h = npy_header("<f4", "(3, 6, 5)");
        assert_eq!(&input[..h.len()], &h[..]);
        assert_eq!(&input[h.len()..], src.arrays[0].1.bytes());
        let labels = std::fs::read(dir.join("labels.npy")).unwrap();
        let h = npy_header("|u1", "(7,)");
        assert_eq!(&labels[..h.len()], &h[..]);
        assert_eq!(&labels[h.len()..], src.arrays[2].1.bytes());
        let target = std::fs::read(dir.join("target.npy")).unwrap();
        let h = npy_header("<f4", "(6, 5)");
        assert_eq!(&target[..h.len()], &h[..]);
        for (k, v) in target[h.len()..].chunks_exact(4).enumerate() {
            let v = f32::from_le_bytes(v.try_into().unwrap());
            let s = src.arrays[1].1.to_f32().unwrap()[k];
            assert!((v - s).abs() <= 1e-3, "{v} {s}");
        }
    }
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("use --force to overwrite; nothing was written"),
        "{}",
        text(&o)
    );
    let o = l3(&["unpack", s(&ds), "-o", s(&out), "--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A forged key that climbs out of the output folder (index CRC fixed): nothing is written.
#[test]
fn unpack_refuses_a_forged_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (ds, out) = (tmp.path().join("ds"), tmp.path().join("out"));
    pack(&ds, 2);
    let shard = ds.join("shard-00000.l3s");
    let mut b = std::fs::read(&shard).unwrap();
    let key = b"run1/t0001";
    let at = b.windows(key.len()).position(|w| w == key).unwrap();
    b[at..at + key.len()].copy_from_slice(b"../../t001");
    let t = b.len() - 32;
    let index_offset = u64::from_le_bytes(b[t..t + 8].try_into().unwrap()) as usize;
    let crc = crc32fast::hash(&b[index_offset..t]);
    b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&shard, &b).unwrap();
    let o = l3(&["unpack", s(&ds), "-o", s(&out)]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("unsafe key \"../../t001\""),
        "{}",
        text(&o)
    );
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
    assert!(!tmp.path().join("t001").exists());
}
