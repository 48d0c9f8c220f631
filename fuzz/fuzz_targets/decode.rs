//! Any bytes: the decoder returns an image or an error, never panics, hangs or over-allocates.
//! The first byte chooses whether the CRC is checked, so the fuzzer also reaches the stream
//! checks behind it without forging checksums.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let options = l3::DecodeOptions {
        limits: l3::Limits {
            max_output_bytes: 64 << 20,
            ..Default::default()
        },
        verify_checksum: mode & 1 == 1,
        parallel: mode & 2 == 2,
    };
    let decoded = l3::decode::decode(file, &options);
    if let Ok((header, pixels)) = &decoded {
        assert_eq!(pixels.len() as u64, header.output_bytes());
    }
    // The f32 CHW layout runs the same checks through another sink: same verdict.
    if mode & 4 == 4 {
        if let Ok(header) = l3::read_header(file) {
            if header.check_limits(&options.limits).is_ok() {
                let mut out = vec![0f32; header.sample_count() as usize];
                let r = l3::decode_into_f32_chw(file, &mut out, l3::Normalize::IMAGENET, &options);
                assert_eq!(r.is_ok(), decoded.is_ok());
            }
        }
    }
    // A window decode (the loader's crop path) of a successfully decoded file gives the same
    // pixels inside the window; the window comes from the mode byte.
    if let Ok((header, pixels)) = &decoded {
        if mode & 8 == 8 {
            let layout = l3::decode::parse(file, &options).expect("decoded above");
            let (w, h) = (header.width, header.height);
            let x0 = (mode as u32 >> 4) % w;
            let y0 = (mode as u32 >> 6) % h;
            let (x1, y1) = ((x0 + w / 2 + 1).min(w), (y0 + h / 3 + 1).min(h));
            let mut out = vec![0u8; pixels.len()];
            l3::decode::decode_layout_window(&layout, &mut out, x0..x1, y0..y1, false)
                .expect("the whole file decoded");
            let px = header.channels() as usize * header.bytes_per_sample();
            for y in y0..y1 {
                let row = y as usize * w as usize * px;
                let span = row + x0 as usize * px..row + x1 as usize * px;
                assert_eq!(out[span.clone()], pixels[span]);
            }
        }
    }
    let _ = l3::inspect::inspect(file, &options);
});
