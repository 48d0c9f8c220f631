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
    // A window decode (the loader's crop path; it stops at the window's last row, so it reads
    // only part of some streams) of any file that parses returns pixels or an error, never a
    // panic; of a file that decodes whole it gives the same pixels inside the window. The
    // window comes from the mode byte.
    if mode & 8 == 8 {
        if let Ok(layout) = l3::decode::parse(file, &options) {
            let header = layout.header;
            let (w, h) = (header.width, header.height);
            let x0 = (mode as u32 >> 4) % w;
            let y0 = (mode as u32 >> 6) % h;
            let (x1, y1) = ((x0 + w / 2 + 1).min(w), (y0 + h / 3 + 1).min(h));
            let mut out = vec![0u8; header.output_bytes() as usize];
            let window = l3::decode::decode_layout_window(&layout, &mut out, x0..x1, y0..y1, false);
            if let Ok((_, pixels)) = &decoded {
                window.expect("the whole file decoded");
                let px = header.channels() as usize * header.bytes_per_sample();
                for y in y0..y1 {
                    let row = y as usize * w as usize * px;
                    let span = row + x0 as usize * px..row + x1 as usize * px;
                    assert_eq!(out[span.clone()], pixels[span]);
                }
            }
        }
    }
    let _ = l3::inspect::inspect(file, &options);
});
