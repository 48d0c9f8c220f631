//! Hostile input: every truncation, every byte flip, forged headers and forged streams give a
//! clear error (never a panic, hang or huge allocation).

use l3::format::{self, HEADER_LEN};
use l3::{
    ColorType, DecodeOptions, EncodeOptions, Error, FormatError, LimitsError, Profile, RawImage,
    Samples,
};
use proptest::prelude::*;

fn sample_file(width: u32, height: u32, color: ColorType, patch_log2: u8) -> Vec<u8> {
    sample_file_in(width, height, color, patch_log2, Profile::Fast)
}

fn sample_file_in(
    width: u32,
    height: u32,
    color: ColorType,
    patch_log2: u8,
    profile: Profile,
) -> Vec<u8> {
    let n = (width * height * color.channels() as u32) as usize;
    let pixels: Vec<u8> = (0..n).map(|i| ((i * 37 + i / 7) % 251) as u8).collect();
    let raw = RawImage {
        width,
        height,
        color,
        samples: Samples::U8(&pixels),
    };
    l3::encode::encode(
        &raw,
        &EncodeOptions {
            profile: l3::ProfileOptions::default_for(profile),
            patch_log2,
            ..Default::default()
        },
    )
    .unwrap()
}

fn fix_crc(data: &mut [u8]) {
    let end = data.len() - format::CHECKSUM_LEN;
    let crc = crc32fast::hash(&data[..end]);
    data[end..].copy_from_slice(&crc.to_le_bytes());
}

fn no_crc() -> DecodeOptions {
    DecodeOptions {
        verify_checksum: false,
        ..Default::default()
    }
}

fn decode(data: &[u8], options: &DecodeOptions) -> l3::Result<Vec<u8>> {
    l3::decode::decode(data, options).map(|(_, px)| px)
}

#[test]
fn every_truncation_is_an_error() {
    for profile in [Profile::Fast, Profile::Compact] {
        let file = sample_file_in(37, 21, ColorType::Rgb, 4, profile);
        for len in 0..file.len() {
            match decode(&file[..len], &DecodeOptions::default()) {
                Err(Error::Format(_)) => {}
                other => panic!(
                    "{profile:?} truncated to {len} of {}: {other:?}",
                    file.len()
                ),
            }
        }
        assert!(decode(&file, &DecodeOptions::default()).is_ok());
    }
}

/// Every byte of a compact file flipped, with the CRC fixed so only the stream checks
/// stand between the bytes and the decoder: never a panic, `inspect` agrees with `decode`, and
/// a flip in the header or size table is always an error. (A flipped stream bit may decode to
/// the same or other pixels: version 2 encodings are not unique, see SPEC.md.)
#[test]
fn compact_byte_flips_with_a_fixed_checksum_never_panic() {
    for (file, what) in [
        (
            sample_file_in(45, 33, ColorType::Rgb, 4, Profile::Compact),
            "rgb 16px",
        ),
        (
            sample_file_in(70, 9, ColorType::Rgba, 6, Profile::Compact),
            "rgba 64px",
        ),
        (
            sample_file_16_in(21, 13, ColorType::Rgb, 7, Profile::Compact),
            "rgb16 128px",
        ),
    ] {
        let data_offset = first_stream(&file);
        for i in 0..file.len() - format::CHECKSUM_LEN {
            for flip in [0x01u8, 0x80, 0x5A] {
                let mut bad = file.clone();
                bad[i] ^= flip;
                assert!(
                    decode(&bad, &DecodeOptions::default()).is_err(),
                    "{what} byte {i}"
                );
                fix_crc(&mut bad);
                let decoded = decode(&bad, &DecodeOptions::default());
                let inspected = l3::inspect::inspect(&bad, &DecodeOptions::default());
                assert_eq!(decoded.is_ok(), inspected.is_ok(), "{what} byte {i}");
                if decoded.is_ok() {
                    assert!(
                        i >= data_offset,
                        "{what}: header/table byte {i} ^ {flip:#x}"
                    );
                }
            }
        }
    }
}

#[test]
fn forged_compact_fields_are_named() {
    // 8x8 gray, one patch: the stream starts right after the 4-byte size table.
    let file = sample_file_in(8, 8, ColorType::Gray, 3, Profile::Compact);
    let s = first_stream(&file);
    let field_of = |bad: &[u8]| match decode(bad, &no_crc()) {
        Err(Error::Format(FormatError::InvalidStreamField { field, .. })) => field,
        other => panic!("expected an invalid field, got {other:?}"),
    };
    // Transform 1 (subtract green) on a gray image.
    let mut bad = file.clone();
    bad[s] = (bad[s] & !0b11) | 0b01;
    assert_eq!(field_of(&bad), "transform");
    // Transform 3 (undefined).
    bad[s] |= 0b11;
    assert_eq!(field_of(&bad), "transform");
    // Predictor 7 (bits 2..5).
    let mut bad = file.clone();
    bad[s] |= 0b111 << 2;
    assert_eq!(field_of(&bad), "predictor");
    // Token count 0 (bits 5..11).
    let mut bad = file.clone();
    bad[s] &= 0b0001_1111;
    bad[s + 1] &= !0b0000_0111;
    assert_eq!(field_of(&bad), "token count");
}

#[test]
fn every_byte_flip_is_caught_by_the_checksum_and_never_panics_without_it() {
    let file = sample_file(29, 19, ColorType::GrayAlpha, 3);
    let original = decode(&file, &DecodeOptions::default()).unwrap();
    for i in 0..file.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bad = file.clone();
            bad[i] ^= mask;
            assert!(
                decode(&bad, &DecodeOptions::default()).is_err(),
                "flip {mask:#x} at byte {i} not detected"
            );
            // Without the checksum (and with a re-forged one) the structure checks still
            // hold: the result is an error or some image, never a panic.
            let _ = decode(&bad, &no_crc());
            fix_crc(&mut bad);
            if let Ok(px) = decode(&bad, &DecodeOptions::default()) {
                assert_eq!(px.len(), original.len());
            }
        }
    }
}

#[test]
fn wrong_magic_names_the_bytes_found() {
    let mut file = sample_file(8, 8, ColorType::Gray, 3);
    file[0] = b'P';
    match decode(&file, &DecodeOptions::default()) {
        Err(Error::Format(FormatError::BadMagic { found, .. })) => assert_eq!(found[0], b'P'),
        other => panic!("{other:?}"),
    }
    let msg = decode(b"\x89PNG\r\n\x1a\n", &DecodeOptions::default())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not an L3 file"), "{msg}");
}

fn forged_header(width: u32, height: u32, channels: u8, depth: u8) -> Vec<u8> {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&format::MAGIC);
    h[format::OFFSET_VERSION] = format::VERSION_FAST;
    h[format::OFFSET_CHANNELS] = channels;
    h[format::OFFSET_DEPTH] = depth;
    h[format::OFFSET_WIDTH..format::OFFSET_WIDTH + 4].copy_from_slice(&width.to_le_bytes());
    h[format::OFFSET_HEIGHT..format::OFFSET_HEIGHT + 4].copy_from_slice(&height.to_le_bytes());
    h[format::OFFSET_PATCH_LOG2] = 6;
    h.to_vec()
}

#[test]
fn absurd_dimensions_fail_before_allocating() {
    let huge = forged_header(format::MAX_DIMENSION, format::MAX_DIMENSION, 4, 16);
    // Default limits: the output size is refused.
    match decode(&huge, &DecodeOptions::default()) {
        Err(Error::Limits(LimitsError::OutputBytes { needed, .. })) => {
            assert_eq!(needed, (format::MAX_DIMENSION as u64).pow(2) * 8)
        }
        other => panic!("{other:?}"),
    }
    // No limits: the size table the header implies is not in the file.
    let unlimited = DecodeOptions {
        limits: l3::Limits::none(),
        ..Default::default()
    };
    match decode(&huge, &unlimited) {
        Err(Error::Format(FormatError::Truncated { what, .. })) => assert_eq!(what, "size table"),
        other => panic!("{other:?}"),
    }
    // Out-of-format values name their field.
    for (w, h, c, d, field) in [
        (0, 5, 3, 8, "width"),
        (5, 0, 3, 8, "height"),
        (5, 5, 0, 8, "channels"),
        (5, 5, 3, 7, "depth"),
        (u32::MAX, 5, 3, 8, "width"),
    ] {
        match decode(&forged_header(w, h, c, d), &unlimited) {
            Err(Error::Format(FormatError::InvalidHeader { field: f, .. })) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn limits_are_enforced() {
    let file = sample_file(40, 30, ColorType::Rgba, 6);
    let tight = DecodeOptions {
        limits: l3::Limits {
            max_output_bytes: 40 * 30 * 4 - 1,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode(&file, &tight),
        Err(Error::Limits(LimitsError::OutputBytes { .. }))
    ));
    let narrow = DecodeOptions {
        limits: l3::Limits {
            max_dimension: 39,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode(&file, &narrow),
        Err(Error::Limits(LimitsError::Dimensions { .. }))
    ));
    let small_input = DecodeOptions {
        limits: l3::Limits {
            max_input_bytes: 100,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        decode(&file, &small_input),
        Err(Error::Limits(LimitsError::InputBytes { .. }))
    ));
}

#[test]
fn wrong_buffer_size_is_a_parameter_error() {
    let file = sample_file(10, 10, ColorType::Rgb, 3);
    let mut out = vec![0u8; 299];
    assert!(matches!(
        l3::decode_into(&file, &mut out, &DecodeOptions::default()),
        Err(Error::Parameter(l3::ParameterError::BufferSize {
            got: 299,
            needed: 300
        }))
    ));
    let mut out16 = vec![0u16; 300];
    assert!(matches!(
        l3::decode_into_u16(&file, &mut out16, &DecodeOptions::default()),
        Err(Error::Parameter(l3::ParameterError::DepthMismatch {
            depth: 8
        }))
    ));
}

/// Byte offset of the first stream of a file.
fn first_stream(file: &[u8]) -> usize {
    l3::read_header(file).unwrap().data_offset() as usize
}

#[test]
fn forged_streams_with_a_valid_checksum_give_stream_errors() {
    let file = sample_file(16, 16, ColorType::Gray, 4);
    let s = first_stream(&file);

    let mut bad = file.clone();
    bad[s] = 9; // predictor id
    fix_crc(&mut bad);
    let err = decode(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Format(FormatError::UnknownPredictor { id: 9, .. })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("patch 0"), "{err}");

    let mut bad = file.clone();
    bad[s + 1] = (bad[s + 1] & 0xF0) | 0x0F; // first row's nbit = 15 > 8
    fix_crc(&mut bad);
    assert!(matches!(
        decode(&bad, &DecodeOptions::default()),
        Err(Error::Format(FormatError::BadBitWidth {
            nbit: 15,
            row: 0,
            ..
        }))
    ));

    // A size table whose entries no longer add up to the data present.
    let mut bad = file.clone();
    bad[HEADER_LEN] = bad[HEADER_LEN].wrapping_add(1);
    fix_crc(&mut bad);
    assert!(matches!(
        decode(&bad, &DecodeOptions::default()),
        Err(Error::Format(FormatError::SizeTableMismatch { .. }))
    ));
}

/// Streams at their patch's smallest size (every row flat, the size a decoder could take as a
/// promise that every row is flat): forged ones give stream errors.
#[test]
fn forged_flat_streams_give_stream_errors() {
    // A constant gray image, 8x8 patches: every stream is flat; the bottom patches are 8x5,
    // so their streams end in 4 padding bits (5 rows of 12 bits).
    let (width, height) = (16u32, 13u32);
    let pixels = vec![77u8; (width * height) as usize];
    let raw = RawImage {
        width,
        height,
        color: ColorType::Gray,
        samples: Samples::U8(&pixels),
    };
    let options = EncodeOptions {
        patch_log2: 3,
        ..EncodeOptions::for_profile(l3::Profile::Fast)
    };
    let file = l3::encode::encode(&raw, &options).unwrap();
    assert_eq!(decode(&file, &DecodeOptions::default()).unwrap(), pixels);
    let s = first_stream(&file);
    let entry = |i: usize| {
        u32::from_le_bytes(
            file[HEADER_LEN + 4 * i..HEADER_LEN + 4 * i + 4]
                .try_into()
                .unwrap(),
        ) as usize
    };
    // 1 predictor byte + 8 rows of 12 bits; 1 + 5 rows of 12 bits rounded up.
    assert_eq!((entry(0), entry(2)), (13, 9));

    let mut bad = file.clone();
    bad[s] = 7; // predictor id
    fix_crc(&mut bad);
    let err = decode(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Format(FormatError::UnknownPredictor { id: 7, .. })
        ),
        "{err:?}"
    );

    let mut bad = file.clone();
    // The first row's nbit = 1: its deltas shift the later rows' fields, so the decoder
    // meets a width above the depth or runs out of stream.
    bad[s + 1] |= 0x01;
    fix_crc(&mut bad);
    let err = decode(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Format(FormatError::StreamOverrun { .. } | FormatError::BadBitWidth { .. })
        ),
        "{err:?}"
    );

    let mut bad = file.clone();
    let last_byte = s + entry(0) + entry(1) + entry(2) - 1; // stream 2's last byte
    bad[last_byte] |= 0x80; // a padding bit
    fix_crc(&mut bad);
    let err = decode(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(err, Error::Format(FormatError::StreamTrailingData { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("patch 2"), "{err}");
}

#[test]
fn stream_with_trailing_bytes_is_rejected() {
    // Move one byte from stream 1 to stream 0 in the size table: totals still add up, but
    // stream 0 now has a trailing byte and stream 1 is short.
    let file = sample_file(32, 16, ColorType::Gray, 4);
    let mut bad = file.clone();
    let e0 = u32::from_le_bytes(bad[HEADER_LEN..HEADER_LEN + 4].try_into().unwrap());
    let e1 = u32::from_le_bytes(bad[HEADER_LEN + 4..HEADER_LEN + 8].try_into().unwrap());
    bad[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&(e0 + 1).to_le_bytes());
    bad[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&(e1 - 1).to_le_bytes());
    fix_crc(&mut bad);
    let err = decode(&bad, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Format(FormatError::StreamTrailingData { .. })
                | Error::Format(FormatError::StreamOverrun { .. })
        ),
        "{err:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes after a valid header prefix: any result but a panic.
    #[test]
    fn garbage_after_a_valid_header_never_panics(
        w in 1u32..200, h in 1u32..200, c in 1u8..=4, d in prop_oneof![Just(8u8), Just(16u8)],
        tail in proptest::collection::vec(any::<u8>(), 0..4096), fix in any::<bool>()
    ) {
        let mut data = forged_header(w, h, c, d);
        data.extend_from_slice(&tail);
        if fix && data.len() >= HEADER_LEN + 4 {
            fix_crc(&mut data);
        }
        let _ = decode(&data, &DecodeOptions::default());
        let _ = l3::inspect::inspect(&data, &DecodeOptions::default());
    }
}

fn sample_file_16(width: u32, height: u32, color: ColorType, patch_log2: u8) -> Vec<u8> {
    sample_file_16_in(width, height, color, patch_log2, Profile::Fast)
}

fn sample_file_16_in(
    width: u32,
    height: u32,
    color: ColorType,
    patch_log2: u8,
    profile: Profile,
) -> Vec<u8> {
    let n = (width * height * color.channels() as u32) as usize;
    let pixels: Vec<u16> = (0..n)
        .map(|i| (i as u16).wrapping_mul(40503) ^ (i as u16 >> 3))
        .collect();
    let raw = RawImage {
        width,
        height,
        color,
        samples: Samples::U16(&pixels),
    };
    let options = EncodeOptions {
        profile: l3::ProfileOptions::default_for(profile),
        patch_log2,
        ..Default::default()
    };
    l3::encode::encode(&raw, &options).unwrap()
}

#[test]
fn sixteen_bit_and_128_pixel_patches_survive_truncation_and_flips() {
    for file in [
        sample_file_16(21, 13, ColorType::Rgb, 7),
        sample_file_16(130, 3, ColorType::GrayAlpha, 7),
        sample_file_16_in(130, 3, ColorType::GrayAlpha, 7, Profile::Compact),
    ] {
        for len in 0..file.len() {
            assert!(decode(&file[..len], &DecodeOptions::default()).is_err());
        }
        for i in 0..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x5A;
            assert!(decode(&bad, &DecodeOptions::default()).is_err(), "byte {i}");
            fix_crc(&mut bad);
            let _ = decode(&bad, &DecodeOptions::default());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A valid header and size table with random stream bodies (and a matching CRC): only the
    /// stream checks stand between the bytes and the decoder. It must never panic, and
    /// `inspect` (what `l3 info` runs) must accept exactly the files the decoder accepts.
    #[test]
    fn random_stream_bodies_behind_a_valid_table(
        w in 1u32..140, h in 1u32..140, c in 1u8..=4, sixteen in any::<bool>(),
        patch_log2 in 3u8..=7, seed in any::<u64>(), every in 1usize..64, compact in any::<bool>()
    ) {
        let color = ColorType::from_channels(c).unwrap();
        let profile = if compact { Profile::Compact } else { Profile::Fast };
        let mut file = if sixteen {
            sample_file_16_in(w, h, color, patch_log2, profile)
        } else {
            sample_file_in(w, h, color, patch_log2, profile)
        };
        let start = l3::read_header(&file).unwrap().data_offset() as usize;
        let end = file.len() - format::CHECKSUM_LEN;
        let mut s = seed | 1;
        for b in file[start..end].iter_mut().step_by(every) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        fix_crc(&mut file);
        let decoded = decode(&file, &DecodeOptions::default());
        let inspected = l3::inspect::inspect(&file, &DecodeOptions::default());
        prop_assert_eq!(decoded.is_ok(), inspected.is_ok(), "decode {:?} inspect {:?}",
            decoded.as_ref().err(), inspected.as_ref().err());
    }
}
