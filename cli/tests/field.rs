//! Float32 array inputs and outputs of the `l3` command line, as an attacker would write
//! them: `.npy` headers that lie, `.json` sidecars that lie or do not belong to their data,
//! inputs that never end, outputs that must not be overwritten.

mod support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use support::{l3, l3_within, s, text};

/// A `.npy` file: version 1 preamble, `header` padded to 64 bytes with its newline, `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// `n` float32 values, little-endian, smooth with one NaN.
fn values(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            if i == 3 {
                f32::NAN
            } else {
                (i as f32 * 0.05).sin()
            }
        })
        .flat_map(f32::to_le_bytes)
        .collect()
}

/// The run failed with exit status 1 (not a panic's 101), and its message has `needle`.
fn assert_fails_with(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{}", text(o));
    assert!(err.contains(needle), "wanted {needle:?}: {}", text(o));
}

/// Every way a `.npy` header can lie fails with a clear error naming the file, without a
/// panic and without allocating what the header declares.
#[test]
fn npy_headers_that_lie_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let c = |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let mut v2_huge = b"\x93NUMPY\x02\x00".to_vec();
    v2_huge.extend_from_slice(&u32::MAX.to_le_bytes());
    let deep = format!("{}{}", "(".repeat(20000), ")".repeat(20000));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty_shape", npy(&c(")"), &values(6)), ".npy header"),
        ("nested", npy(&c(&deep), &values(6)), ".npy header"),
        (
            "overflow",
            npy(&c("(4294967295, 4294967295, 4294967295)"), &values(6)),
            "more values than memory can address",
        ),
        (
            "too_big_dim",
            npy(&c("(4294967296, 2)"), &values(6)),
            "2^32 or more",
        ),
        (
            "five_dim",
            npy(&c("(1, 1, 1, 2, 3)"), &values(6)),
            "1 to 4 non-zero",
        ),
        ("short_data", npy(&c("(2, 3)"), &values(5)), "needs 24"),
        ("long_data", npy(&c("(2, 3)"), &values(7)), "needs 24"),
        (
            "float64",
            npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                &values(12),
            ),
            "'<f4'",
        ),
        (
            "fortran",
            npy(
                "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                &values(6),
            ),
            "C order",
        ),
        (
            "unknown_key",
            npy(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1, }",
                &values(6),
            ),
            ".npy header",
        ),
        ("header_past_end", v2_huge, "does not fit the file"),
        (
            "truncated",
            b"\x93NUMPY\x01".to_vec(),
            "ends inside its preamble",
        ),
        (
            "version_9",
            b"\x93NUMPY\x09\x00\x10\x00{}".to_vec(),
            "version 9",
        ),
        ("not_npy", b"PK\x03\x04 a zip".to_vec(), "not a .npy file"),
    ];
    for (name, bytes, needle) in &cases {
        let path = tmp.path().join(format!("{name}.npy"));
        std::fs::write(&path, bytes).unwrap();
        let o = l3(&["encode", s(&path), "--max-error", "0.1"]);
        assert_fails_with(&o, needle);
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("{name}.npy")),
            "{}",
            text(&o)
        );
        assert!(!path.with_extension("l3f").exists(), "{name}");
    }
    // The input limit applies before the data is read.
    let ok = tmp.path().join("ok.npy");
    std::fs::write(&ok, npy(&c("(20, 30)"), &values(600))).unwrap();
    let o = l3(&[
        "encode",
        s(&ok),
        "--max-error",
        "0.1",
        "--max-input-bytes",
        "1000",
    ]);
    assert_fails_with(&o, "above the limit of 1000 bytes");
    let o = l3(&["encode", s(&ok), "--max-error", "0.1"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// A `.f32` + `.json` input: the sidecar is typed and validated (unknown fields, wrong
/// types, a shape that does not fit the data, a byte count or CRC of other data), and every
/// error names the sidecar or the field at fault.
#[test]
fn f32_sidecars_are_validated() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("a.f32");
    let sidecar = tmp.path().join("a.json");
    std::fs::write(&data, values(6)).unwrap();
    let crc = crc32fast::hash(&values(6));
    let cases = [
        (
            r#"{"shape": [2, 3], "fil_value": 0}"#,
            "unknown field `fil_value`",
        ),
        (r#"{"shape": "2x3"}"#, "invalid type"),
        (r#"{"shape": [2, -3]}"#, "invalid value"),
        (r#"{"shape": [2, 4294967296]}"#, "invalid value"),
        (r#"{"fill_value": 1}"#, "missing field `shape`"),
        (r#"{"shape": [1, 1, 1, 2, 3]}"#, "\"shape\""),
        (r#"{"shape": [3, 3]}"#, "needs 36"),
        (
            r#"{"shape": [2, 3], "dtype": "float64"}"#,
            "\"dtype\" must be",
        ),
        (r#"{"shape": [2, 3], "order": "F"}"#, "\"order\" must be"),
        (
            r#"{"shape": [2, 3], "bytes": 28}"#,
            "a sidecar of other data",
        ),
        (
            r#"{"shape": [2, 3], "crc32": 1}"#,
            "a sidecar of other data",
        ),
        ("not json", "not a valid sidecar"),
    ];
    for (json, needle) in cases {
        std::fs::write(&sidecar, json).unwrap();
        let o = l3(&["encode-field", s(&data), "--max-error", "0.1"]);
        assert_fails_with(&o, needle);
        assert!(
            text(&o).contains("a.json") || text(&o).contains("a.f32"),
            "{}",
            text(&o)
        );
    }
    let good = format!(r#"{{"shape": [2, 3], "fill_value": null, "bytes": 24, "crc32": {crc}}}"#);
    std::fs::write(&sidecar, good).unwrap();
    let o = l3(&["encode-field", s(&data), "--max-error", "0.1"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::remove_file(&sidecar).unwrap();
    let o = l3(&["encode-field", s(&data), "--max-error", "0.1", "--force"]);
    assert_fails_with(&o, "a.json");
}

/// `decode-field -o x.f32` writes the data and its sidecar, which records the data's length
/// and CRC-32 (so a sidecar never passes for other data); existing outputs, data or sidecar,
/// are kept unless `--force`, like `l3 decode`.
#[test]
fn decode_field_keeps_existing_outputs_and_ties_the_sidecar_to_its_data() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("f.npy");
    std::fs::write(
        &input,
        npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (20, 30), }",
            &values(600),
        ),
    )
    .unwrap();
    let field = tmp.path().join("f.l3f");
    let o = l3(&[
        "encode-field",
        s(&input),
        "--max-error",
        "0.01",
        "-o",
        s(&field),
    ]);
    assert!(o.status.success(), "{}", text(&o));

    // An existing .npy is kept without --force, replaced with it.
    let npy_out = tmp.path().join("out.npy");
    std::fs::write(&npy_out, b"precious").unwrap();
    let o = l3(&["decode-field", s(&field), "-o", s(&npy_out)]);
    assert_fails_with(&o, "already exists");
    assert_eq!(std::fs::read(&npy_out).unwrap(), b"precious");
    let o = l3(&["decode-field", s(&field), "-o", s(&npy_out), "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    // The written .npy reads back through the encoder, within the bound.
    let o = l3(&["encode-field", s(&npy_out), "--max-error", "0.01"]);
    assert!(o.status.success(), "{}", text(&o));

    // .f32: an existing sidecar alone blocks the write too.
    let raw = tmp.path().join("out.f32");
    let side = tmp.path().join("out.json");
    std::fs::write(&side, b"{}").unwrap();
    let o = l3(&["decode-field", s(&field), "-o", s(&raw)]);
    assert_fails_with(&o, "already exists");
    assert!(!raw.exists());
    let o = l3(&["decode-field", s(&field), "-o", s(&raw), "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&side).unwrap()).unwrap();
    let body = std::fs::read(&raw).unwrap();
    assert_eq!(meta["bytes"], body.len() as u64);
    assert_eq!(meta["crc32"], crc32fast::hash(&body));
    assert_eq!(meta["shape"], serde_json::json!([20, 30]));
    let o = l3(&["encode-field", s(&raw), "--max-error", "0.01"]);
    assert!(o.status.success(), "{}", text(&o));
    // Other data of the same length under the sidecar: caught.
    let mut other = body.clone();
    other[8] ^= 0x40;
    std::fs::write(&raw, &other).unwrap();
    let o = l3(&["encode-field", s(&raw), "--max-error", "0.01", "--force"]);
    assert_fails_with(&o, "a sidecar of other data");
    // No temp file is left anywhere.
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("l3-tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// Inputs are read within `--max-input-bytes` even when their size says nothing (a device that
/// never ends, under an L3 name): a limits error, never a read that fills memory.
#[cfg(unix)]
#[test]
fn endless_inputs_stop_at_the_input_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let zero = Path::new("/dev/zero");
    if !zero.exists() {
        return;
    }
    for name in ["z.l3f", "z.l3", "z.npy"] {
        std::os::unix::fs::symlink(zero, tmp.path().join(name)).unwrap();
    }
    let p = |name: &str| tmp.path().join(name);
    let (zf, zl, zn, out, png) = (p("z.l3f"), p("z.l3"), p("z.npy"), p("out.npy"), p("z.png"));
    let nf = p("n.l3f");
    let runs: [&[&str]; 4] = [
        &["decode-field", s(&zf), "-o", s(&out)],
        &["info", s(&zl)],
        &["decode", s(&zl), "-o", s(&png)],
        &["encode-field", s(&zn), "--max-error", "1", "-o", s(&nf)],
    ];
    for args in runs {
        let mut args = args.to_vec();
        args.extend(["--max-input-bytes", "4096"]);
        let o = l3_within(&args, Duration::from_secs(60));
        assert_fails_with(&o, "above the limit of 4096 bytes");
    }
}

/// `encode-field` resumes like `encode`: the same input and options are up to date; another
/// bound, or a changed input, encodes again.
#[test]
fn encode_field_resume_compares_options_and_input() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("f.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (20, 30), }";
    std::fs::write(&input, npy(header, &values(600))).unwrap();
    let field = tmp.path().join("f.l3f");
    let run = |bound: &str| l3(&["encode-field", s(&input), "--max-error", bound]);
    let o = run("0.01");
    assert!(
        o.status.success() && !text(&o).contains("up to date"),
        "{}",
        text(&o)
    );
    let first = std::fs::read(&field).unwrap();
    let o = run("0.01");
    assert!(text(&o).contains("up to date"), "{}", text(&o));
    let o = run("0.1");
    assert!(
        o.status.success() && !text(&o).contains("up to date"),
        "{}",
        text(&o)
    );
    assert_ne!(std::fs::read(&field).unwrap(), first, "the bound changed");
    // A different input of the same length.
    let mut other = values(600);
    other[100] ^= 0x10;
    std::fs::write(&input, npy(header, &other)).unwrap();
    let o = run("0.1");
    assert!(
        o.status.success() && !text(&o).contains("up to date"),
        "{}",
        text(&o)
    );
    // An output that is not a field file is never replaced without --force.
    std::fs::write(&field, b"not a field").unwrap();
    let o = run("0.1");
    assert_fails_with(&o, "not an L3 file");
    assert_eq!(std::fs::read(&field).unwrap(), b"not a field");
}

/// A bound that is not a finite number above 0 is refused with a message that says so and
/// gives the number as written (not its bits).
#[test]
fn field_bounds_must_be_finite_and_positive() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("f.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (20, 30), }";
    std::fs::write(&input, npy(header, &values(600))).unwrap();
    for (flag, value, shown) in [
        ("--relative", "nan", "NaN"),
        ("--max-error", "inf", "inf"),
        ("--relative", "0", "0"),
    ] {
        let o = l3(&["encode-field", s(&input), flag, value]);
        assert_fails_with(&o, &format!("must be a finite number above 0, got {shown}"));
    }
}

/// Error-bounded arrays are written as version 3 by default, of any axis count, and as
/// version 1 (2 or 3 axes) with `--format v1`; `decode-field` gives every value within the
/// bound (NaN exactly), `info` names the version, version 1 refuses 1 axis clearly, and
/// `--profile` (version 1's bin image) is refused without `--format v1`.
#[test]
fn error_bounded_versions_by_format() {
    let tmp = tempfile::tempdir().unwrap();
    let c = |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // `encode-field NAME.npy --max-error 0.01` with more arguments.
    let encode = |name: &str, more: &[&str]| {
        let input = tmp.path().join(format!("{name}.npy"));
        l3(&[&["encode-field", s(&input), "--max-error", "0.01"], more].concat())
    };
    for (name, shape, format, version) in [
        ("d1", "(600,)", None, "version 3"),
        ("d4", "(2, 3, 10, 10)", None, "version 3"),
        ("d2", "(20, 30)", None, "version 3"),
        ("d3", "(2, 30, 10)", None, "version 3"),
        ("d2v1", "(20, 30)", Some("v1"), "version 1"),
        ("d3v1", "(2, 30, 10)", Some("v1"), "version 1"),
    ] {
        let input = tmp.path().join(format!("{name}.npy"));
        std::fs::write(&input, npy(&c(shape), &values(600))).unwrap();
        let file = tmp.path().join(format!("{name}.l3f"));
        let mut more = vec!["-o", s(&file)];
        if let Some(f) = format {
            more.extend(["--format", f]);
        }
        let o = encode(name, &more);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(version), "{name}: {}", text(&o));
        let o = l3(&["info", s(&file)]);
        assert!(
            o.status.success() && text(&o).contains(&format!("field {version}")),
            "{}",
            text(&o)
        );
        let back = tmp.path().join(format!("{name}-back.f32"));
        let o = l3(&["decode-field", s(&file), "-o", s(&back)]);
        assert!(o.status.success(), "{}", text(&o));
        let got: Vec<f32> = std::fs::read(&back)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<f32> = values(600)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        for (i, (&w, &g)) in want.iter().zip(&got).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "{name}: value {i}");
            } else {
                assert!(
                    (w as f64 - g as f64).abs() <= 0.01,
                    "{name}: value {i}: {w} -> {g}"
                );
            }
        }
    }
    let o = encode("d1", &["--format", "v1", "--force"]);
    assert_fails_with(&o, "2 or 3 dimensions");
    let o = encode("d2", &["--profile", "fast", "--force"]);
    assert_fails_with(&o, "--profile is for --format v1");
    let file = tmp.path().join("d2-fast.l3f");
    let o = encode(
        "d2",
        &["--format", "v1", "--profile", "fast", "-o", s(&file)],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("version 1"), "{}", text(&o));
}

/// `encode-field --lossless` stores float32 (1-D and 4-D) and bfloat16 raw arrays bit for bit:
/// `decode-field` gives back the same bytes and dtype, `info` shows the lossless header, and a
/// raw file whose length does not match the sidecar's shape fails cleanly.
#[test]
fn lossless_round_trips_raw_arrays() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str, Vec<u8>); 3] = [
        ("v1", "[600]", "float32", values(600)),
        ("v4", "[2, 3, 10, 10]", "float32", values(600)),
        (
            "b2",
            "[20, 30]",
            "bfloat16",
            values(600).chunks(4).flat_map(|c| [c[2], c[3]]).collect(),
        ),
    ];
    for (name, shape, dtype, data) in cases {
        let input = tmp.path().join(format!("{name}.raw"));
        std::fs::write(&input, &data).unwrap();
        std::fs::write(
            input.with_extension("json"),
            format!("{{\"shape\": {shape}, \"dtype\": \"{dtype}\"}}"),
        )
        .unwrap();
        let file = tmp.path().join(format!("{name}.l3f"));
        let o = l3(&["encode-field", "--lossless", s(&input), "-o", s(&file)]);
        assert!(o.status.success(), "{}", text(&o));
        let o = l3(&["info", s(&file)]);
        assert!(
            o.status.success() && text(&o).contains("lossless"),
            "{}",
            text(&o)
        );
        assert!(text(&o).contains(dtype), "{}", text(&o));
        let back = tmp.path().join(format!("{name}-back.raw"));
        let o = l3(&["decode-field", s(&file), "-o", s(&back)]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            std::fs::read(&back).unwrap() == data,
            "{name}: bytes differ"
        );
        let meta = std::fs::read_to_string(back.with_extension("json")).unwrap();
        assert!(meta.contains(dtype), "{meta}");
    }
    let short = tmp.path().join("short.raw");
    std::fs::write(&short, values(5)).unwrap();
    std::fs::write(short.with_extension("json"), "{\"shape\": [6]}").unwrap();
    let o = l3(&["encode-field", "--lossless", s(&short)]);
    assert_fails_with(&o, "bytes");
}

/// A bound too fine for the bins (a range of 1e3 at 1e-6, for version 1 and version 3):
/// `encode-field` stores the array exactly (it says version 2, bound 0) instead of failing,
/// and `decode-field` gives the values back bit for bit.
#[test]
fn a_bound_too_fine_for_the_bins_is_stored_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = values(600)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * 500.0)
        .flat_map(f32::to_le_bytes)
        .collect();
    let input = tmp.path().join("wide.npy");
    std::fs::write(
        &input,
        npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (20, 30), }",
            &data,
        ),
    )
    .unwrap();
    for format in ["v1", "v3"] {
        let field = tmp.path().join(format!("wide-{format}.l3f"));
        let o = l3(&[
            "encode-field",
            s(&input),
            "--max-error",
            "1e-6",
            "--format",
            format,
            "-o",
            s(&field),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("version 2, bound 0"), "{}", text(&o));
        let out = tmp.path().join(format!("wide-{format}.npy"));
        let o = l3(&["decode-field", s(&field), "-o", s(&out)]);
        assert!(o.status.success(), "{}", text(&o));
        let back = std::fs::read(&out).unwrap();
        assert_eq!(&back[back.len() - data.len()..], &data[..], "{format}");
    }
}

/// A lossless file with second differences (the fixture `tests/fixtures/fields/v2_second.l3f`):
/// `info` says so, and `decode-field` gives back its source's bytes.
#[test]
fn info_shows_second_differences_and_decode_field_reads_them() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/fields");
    let file = format!("{dir}/v2_second.l3f");
    let o = l3(&["info", &file]);
    assert!(
        o.status.success() && text(&o).contains("again along 0b1 (second differences)"),
        "{}",
        text(&o)
    );
    let tmp = tempfile::tempdir().unwrap();
    let back = tmp.path().join("back.raw");
    let o = l3(&["decode-field", &file, "-o", s(&back)]);
    assert!(o.status.success(), "{}", text(&o));
    let want = std::fs::read(format!("{dir}/second_src.f32")).unwrap();
    assert!(std::fs::read(&back).unwrap() == want, "bytes differ");
}
