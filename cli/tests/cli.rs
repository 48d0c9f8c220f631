//! The `l3` command line, as a script would use it: trees, resume, verify, exit codes.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use std::path::Path;

use support::{l3, s, text};

/// `l3 verify DIR --against ORIGINALS` succeeds and reports `n` files identical.
fn assert_verified(l3dir: &Path, originals: &Path, n: usize) {
    let o = l3(&["verify", s(l3dir), "--against", s(originals)]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .matches("identical to")
            .count(),
        n,
        "{}",
        text(&o)
    );
}

/// A small input tree: two samples, one in a subdirectory, plus a non-image file.
fn input_tree(dir: &Path) {
    let samples = common::samples_dir();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::copy(samples.join("skimage_camera_gray.png"), dir.join("a.png")).unwrap();
    std::fs::copy(
        samples.join("jxl_hdr_room_16bit.png"),
        dir.join("sub/b.png"),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not an image").unwrap();
}

#[test]
fn encode_tree_resume_verify_decode_info() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    let output = tmp.path().join("out");
    input_tree(&input);
    // A temp file left by a crashed run must be cleaned up, never taken as output.
    std::fs::create_dir_all(output.join("sub")).unwrap();
    // (No process can have this pid: Linux caps pids at 2^22.)
    let stale = output.join("sub/.b.l3.l3-tmp-99999999");
    std::fs::write(&stale, b"partial").unwrap();
    // One of a run that is still going (this test process) must be left alone.
    let live = output.join(format!("sub/.c.l3.l3-tmp-{}", std::process::id()));
    std::fs::write(&live, b"in progress").unwrap();

    let o = l3(&["encode", "--profile", "fast", s(&input), "-o", s(&output)]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("encoded 2 file(s), skipped 0"), "{}", text(&o));
    assert!(output.join("a.l3").is_file() && output.join("sub/b.l3").is_file());
    assert!(!stale.exists(), "stale temp file not removed");
    assert!(live.exists(), "a live run's temp file was removed");
    std::fs::remove_file(&live).unwrap();
    let leftovers: Vec<_> = common::files_under(&output)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("l3-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Rerun: everything is up to date.
    let o = l3(&["encode", "--profile", "fast", s(&input), "-o", s(&output)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("encoded 0 file(s), skipped 2"),
        "{}",
        text(&o)
    );

    // Verify against the originals, pixel for pixel.
    assert_verified(&output, &input, 2);

    // Decode back to PNG and compare with the original through `image`.
    let png = tmp.path().join("b.png");
    let o = l3(&["decode", s(&output.join("sub/b.l3")), "-o", s(&png)]);
    assert!(o.status.success(), "{}", text(&o));
    let a = image::open(input.join("sub/b.png")).unwrap();
    let b = image::open(&png).unwrap();
    assert_eq!(a.color(), b.color());
    assert_eq!(a.as_bytes(), b.as_bytes());

    // Decoding next to the originals (no -o) must never replace them.
    let before = std::fs::read(input.join("a.png")).unwrap();
    std::fs::copy(output.join("a.l3"), input.join("a.l3")).unwrap();
    let o = l3(&["decode", s(&input.join("a.l3"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already exists"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(input.join("a.png")).unwrap(), before);
    std::fs::remove_file(input.join("a.l3")).unwrap();
    // A lossy output format is refused.
    let o = l3(&[
        "decode",
        s(&output.join("a.l3")),
        "-o",
        s(&tmp.path().join("a.jpg")),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not lossless"),
        "{}",
        text(&o)
    );

    // PNM too.
    let pnm = tmp.path().join("a.pnm");
    let o = l3(&["decode", s(&output.join("a.l3")), "-o", s(&pnm)]);
    assert!(o.status.success(), "{}", text(&o));
    let a = image::open(input.join("a.png")).unwrap();
    let b = image::open(&pnm).unwrap();
    assert_eq!(a.as_bytes(), b.as_bytes());

    let o = l3(&["info", s(&output.join("sub/b.l3"))]);
    assert!(o.status.success(), "{}", text(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "676x449 RGB 16-bit",
        "grid 11x8 = 88 patches",
        "bpp",
        "row widths",
    ] {
        assert!(info.contains(needle), "missing {needle:?}:\n{info}");
    }
}

#[test]
fn corrupt_file_fails_with_exit_code_1_and_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let l3file = tmp.path().join("a.l3");
    let o = l3(&[
        "encode",
        s(&common::samples_dir().join("skimage_coffee.png")),
        "-o",
        s(&l3file),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let mut bytes = std::fs::read(&l3file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&l3file, &bytes).unwrap();
    for cmd in ["verify", "info", "decode"] {
        let o = l3(&[cmd, s(&l3file)]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("a.l3") && err.contains("checksum mismatch"),
            "{cmd}: {}",
            text(&o)
        );
    }
    // A non-image input to encode fails the same way, and writes nothing.
    let junk = tmp.path().join("junk.png");
    std::fs::write(&junk, b"\x89PNG\r\n\x1a\nnot really").unwrap();
    let o = l3(&["encode", s(&junk)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!tmp.path().join("junk.l3").exists());
}

#[test]
fn usage_errors_exit_2() {
    let o = l3(&["encode"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = l3(&["encode", "x.png", "--patch-size", "48"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn colliding_outputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let samples = common::samples_dir();
    std::fs::copy(samples.join("skimage_coffee.png"), tmp.path().join("x.png")).unwrap();
    let img = image::open(samples.join("skimage_coffee.png")).unwrap();
    img.save(tmp.path().join("x.bmp")).unwrap();
    let o = l3(&["encode", s(tmp.path())]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("would both be written"),
        "{}",
        text(&o)
    );
}

/// `--profile compact` writes version-2 files that are smaller than the fast ones, that
/// `info` names, and that `verify` and `decode` read back exactly.
#[test]
fn compact_profile_encode_info_verify_decode() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    input_tree(&input);
    let (fast, compact) = (tmp.path().join("fast"), tmp.path().join("compact"));
    for (dir, profile) in [(&fast, "fast"), (&compact, "compact")] {
        let o = l3(&[
            "encode",
            "-q",
            "--profile",
            profile,
            s(&input),
            "-o",
            s(dir),
        ]);
        assert!(o.status.success(), "{}", text(&o));
    }
    for name in ["a.l3", "sub/b.l3"] {
        let (f, c) = (fast.join(name), compact.join(name));
        let (fl, cl) = (
            std::fs::metadata(&f).unwrap().len(),
            std::fs::metadata(&c).unwrap().len(),
        );
        assert!(cl < fl, "{name}: compact {cl} bytes, fast {fl}");
        let o = l3(&["info", s(&c)]);
        assert!(o.status.success(), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("version 2 (compact)") && out.contains("predictors"),
            "{out}"
        );
    }
    assert_verified(&compact, &input, 2);
    let png = tmp.path().join("png");
    let o = l3(&["decode", s(&compact), "-o", s(&png)]);
    assert!(o.status.success(), "{}", text(&o));
    let a = image::open(png.join("sub/b.png")).unwrap();
    let b = image::open(input.join("sub/b.png")).unwrap();
    assert_eq!(a.as_bytes(), b.as_bytes());
}

#[test]
#[cfg(feature = "gpu")]
fn gpu_decode_matches_the_cpu_decode() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    input_tree(&input);
    // Half the files in each profile: one GPU batch decodes both.
    let l3dir = tmp.path().join("l3");
    let o = l3(&["encode", "-q", s(&input), "-o", s(&l3dir)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&[
        "encode",
        "-q",
        "--force",
        "--profile",
        "compact",
        s(&input.join("sub/b.png")),
        "-o",
        s(&l3dir.join("sub/b.l3")),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let gpu_out = tmp.path().join("gpu");
    let o = l3(&["decode", "--gpu", s(&l3dir), "-o", s(&gpu_out)]);
    if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no usable GPU adapter") {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true but no GPU adapter: {}",
            text(&o)
        );
        eprintln!("SKIPPED: no GPU adapter");
        return;
    }
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("GPU: "),
        "adapter not named: {}",
        text(&o)
    );
    // Pixel for pixel against the originals.
    assert_verified(&l3dir, &gpu_out, 2);
    for (png, orig) in [("a.png", "a.png"), ("sub/b.png", "sub/b.png")] {
        let a = image::open(gpu_out.join(png)).unwrap();
        let b = image::open(input.join(orig)).unwrap();
        assert_eq!(a.as_bytes(), b.as_bytes(), "{png}");
    }
}

#[test]
fn limits_on_the_command_line_apply_and_each_message_appears_once() {
    let tmp = tempfile::tempdir().unwrap();
    let l3file = tmp.path().join("c.l3");
    let png = common::samples_dir().join("skimage_coffee.png");
    let o = l3(&["encode", s(&png), "-o", s(&l3file)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["decode", s(&l3file), "--max-output-bytes", "1000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("decoded image needs 720000 bytes").count(),
        1,
        "{}",
        text(&o)
    );
    let o = l3(&[
        "encode",
        s(&png),
        "-o",
        s(&tmp.path().join("d.l3")),
        "--max-output-bytes",
        "1000",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!tmp.path().join("d.l3").exists());
}

/// `--max-error`: an error-bounded tree encodes, `info` states the bound, `verify --against`
/// accepts it within the bound and reports the largest difference; a lossless check of the
/// same files against other originals fails.
#[test]
fn error_bounded_encode_info_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    input_tree(&input);
    let out = tmp.path().join("lossy");
    let o = l3(&["encode", "-q", "--max-error", "3", s(&input), "-o", s(&out)]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["info", s(&out.join("a.l3"))]);
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("within 3 of the original"), "{info}");
    let o = l3(&["verify", s(&out), "--against", s(&input)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("within its bound 3"), "{}", text(&o));
    let o = l3(&[
        "encode",
        "-q",
        "--max-error",
        "200",
        s(&input),
        "-o",
        s(&tmp.path().join("too_lossy")),
    ]);
    assert!(
        !o.status.success(),
        "a bound above 127 for 8-bit images is refused"
    );
    assert!(text(&o).contains("max_error"), "{}", text(&o));
}

/// Float fields on the command line: `.npy` in, `.l3f` out, back to `.npy` and `.f32` within
/// the bound, NaN kept; a corrupt field file fails with a clear error.
#[test]
fn fields_encode_and_decode() {
    let tmp = tempfile::tempdir().unwrap();
    let (ny, nx) = (30usize, 40usize);
    let values: Vec<f32> = (0..ny * nx)
        .map(|i| {
            if i == 7 {
                f32::NAN
            } else {
                (i as f32 * 0.01).sin() * 5.0
            }
        })
        .collect();
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({ny}, {nx}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    let input = tmp.path().join("f.npy");
    std::fs::write(&input, &npy).unwrap();
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
    for ext in ["npy", "f32"] {
        let back = tmp.path().join(format!("back.{ext}"));
        let o = l3(&["decode-field", s(&field), "-o", s(&back)]);
        assert!(o.status.success(), "{}", text(&o));
        let bytes = std::fs::read(&back).unwrap();
        let data = &bytes[bytes.len() - values.len() * 4..];
        for (i, (c, &v)) in data.chunks_exact(4).zip(&values).enumerate() {
            let d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if v.is_nan() {
                assert!(d.is_nan(), "value {i}");
            } else {
                assert!((d - v).abs() <= 0.01, "value {i}: {v} -> {d}");
            }
        }
    }
    // The same through `l3 encode` / `l3 decode`, by extension.
    let via_encode = tmp.path().join("g.l3f");
    let o = l3(&[
        "encode",
        s(&input),
        "--relative",
        "1e-3",
        "-o",
        s(&via_encode),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = l3(&["decode", s(&via_encode)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(tmp.path().join("g.npy").is_file());
    let o = l3(&["encode", s(&input)]);
    assert!(
        !o.status.success() && text(&o).contains("bound"),
        "{}",
        text(&o)
    );
    let o = l3(&["info", s(&field)]);
    assert!(o.status.success(), "{}", text(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(
        info.contains("error-bounded array (field version 3)")
            && info.contains("within 1.000000e-2"),
        "{info}"
    );
    let mut bad = std::fs::read(&field).unwrap();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    std::fs::write(&field, &bad).unwrap();
    let o = l3(&[
        "decode-field",
        s(&field),
        "-o",
        s(&tmp.path().join("x.npy")),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("checksum") || text(&o).contains("CRC"),
        "{}",
        text(&o)
    );
}

/// Resume compares what makes the output: `encode --max-error 4` then a lossless `encode`
/// encodes again (the lossy file is not "up to date"); a changed input or profile too; the
/// same input and options are skipped; an output replaced by other bytes is encoded again,
/// and an existing file that is not an L3 file is never overwritten without `--force`.
#[test]
fn resume_compares_options_and_input_not_only_times() {
    let tmp = tempfile::tempdir().unwrap();
    let samples = common::samples_dir();
    let input = tmp.path().join("a.png");
    let out = tmp.path().join("a.l3");
    std::fs::copy(samples.join("skimage_camera_gray.png"), &input).unwrap();
    let encode = |extra: &[&str]| {
        let mut args = vec!["encode", s(&input)];
        args.extend_from_slice(extra);
        let o = l3(&args);
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let bound_of = |p: &Path| {
        l3::read_header(&std::fs::read(p).unwrap())
            .unwrap()
            .max_error
    };
    assert!(encode(&["--max-error", "4"]).contains("encoded 1 file(s)"));
    assert_eq!(bound_of(&out), 4);
    let o = encode(&[]);
    assert!(o.contains("encoded 1 file(s), skipped 0"), "{o}");
    assert_eq!(bound_of(&out), 0, "the lossy output was kept as up to date");
    assert!(encode(&[]).contains("encoded 0 file(s), skipped 1"));
    // Another option that changes the bytes.
    assert!(encode(&["--profile", "fast"]).contains("encoded 1 file(s)"));
    assert!(encode(&["--profile", "fast"]).contains("skipped 1"));
    // Another input under the same name (its length differs).
    std::fs::copy(samples.join("skimage_coffee.png"), &input).unwrap();
    assert!(encode(&["--profile", "fast"]).contains("encoded 1 file(s)"));
    let decoded = l3::decode_image(&std::fs::read(&out).unwrap(), &Default::default()).unwrap();
    assert_eq!(
        decoded.as_bytes(),
        image::open(&input).unwrap().as_bytes(),
        "the output is not the new input's"
    );
    // The output replaced by another L3 file: encoded again.
    let other = tmp.path().join("b.l3");
    let o = l3(&[
        "encode",
        s(&samples.join("skimage_camera_gray.png")),
        "-o",
        s(&other),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::copy(&other, &out).unwrap();
    assert!(encode(&["--profile", "compact"]).contains("encoded 1 file(s)"));
    // A file that is not an L3 file is never overwritten without --force.
    std::fs::write(&out, b"my notes").unwrap();
    let o = l3(&["encode", s(&input)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not an L3 file"), "{}", text(&o));
    assert_eq!(std::fs::read(&out).unwrap(), b"my notes");
    assert!(encode(&["--force"]).contains("encoded 1 file(s)"));
    // Nothing but the input, the outputs and their hidden resume records.
    let mut names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".a.l3.l3-resume",
            ".b.l3.l3-resume",
            "a.l3",
            "a.png",
            "b.l3"
        ]
    );
}
