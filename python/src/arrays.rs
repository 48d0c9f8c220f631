//! NumPy arrays in and out: images as `uint8` / `uint16` arrays of shape `(H, W)` (one
//! channel) or `(H, W, C)` with C in 1..=4, as imageio and Pillow give them.

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use l3::{ColorType, RawImage, Samples};

use crate::parameter_error;

/// An image copied out of a NumPy array, so that encoding can run without the GIL.
pub(crate) struct OwnedImage {
    pub width: u32,
    pub height: u32,
    pub color: ColorType,
    pub samples: OwnedSamples,
}

pub(crate) enum OwnedSamples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl OwnedImage {
    pub fn raw(&self) -> RawImage<'_> {
        RawImage {
            width: self.width,
            height: self.height,
            color: self.color,
            samples: match &self.samples {
                OwnedSamples::U8(v) => Samples::U8(v),
                OwnedSamples::U16(v) => Samples::U16(v),
            },
        }
    }
}

/// The image in `array`: a `uint8` or `uint16` array of shape `(H, W)` or `(H, W, C)`, C in
/// 1..=4. A non-contiguous array is copied into C order first; any other dtype or shape is a
/// `ParameterError` naming what was given.
pub(crate) fn image_from_array(array: &Bound<'_, PyAny>) -> PyResult<OwnedImage> {
    let py = array.py();
    let np = py.import("numpy")?;
    let contiguous = np.call_method1("ascontiguousarray", (array,))?;
    let untyped = contiguous
        .cast::<PyUntypedArray>()
        .map_err(|_| parameter_error("expected a NumPy array"))?;
    let shape = untyped.shape().to_vec();
    let (height, width, channels) = match shape[..] {
        [h, w] => (h, w, 1),
        [h, w, c] => (h, w, c),
        _ => {
            return Err(parameter_error(format!(
                "expected an array of shape (H, W) or (H, W, C), got shape {shape:?}"
            )))
        }
    };
    let color = u8::try_from(channels)
        .ok()
        .and_then(ColorType::from_channels)
        .ok_or_else(|| {
            parameter_error(format!(
                "expected 1 to 4 channels (the last axis), got {channels} (shape {shape:?})"
            ))
        })?;
    let dimension = |n: usize, what: &str| {
        u32::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| parameter_error(format!("{what} {n} is not a valid image {what}")))
    };
    let (width, height) = (dimension(width, "width")?, dimension(height, "height")?);
    let samples = if let Ok(a) = contiguous.cast::<PyArrayDyn<u8>>() {
        OwnedSamples::U8(a.readonly().as_slice()?.to_vec())
    } else if let Ok(a) = contiguous.cast::<PyArrayDyn<u16>>() {
        OwnedSamples::U16(a.readonly().as_slice()?.to_vec())
    } else {
        let dtype = untyped.dtype().str()?.to_string();
        return Err(parameter_error(format!(
            "unsupported dtype {dtype}: l3 stores uint8 and uint16 images (native byte order)"
        )));
    };
    Ok(OwnedImage {
        width,
        height,
        color,
        samples,
    })
}

/// The shape of an image's array: `(H, W)` for one channel, else `(H, W, C)`.
pub(crate) fn image_shape(width: u32, height: u32, channels: u8) -> Vec<usize> {
    if channels == 1 {
        vec![height as usize, width as usize]
    } else {
        vec![height as usize, width as usize, channels as usize]
    }
}

/// A NumPy array over decoded samples (8-bit: bytes; 16-bit: little-endian pairs), shaped as
/// [`image_shape`], without copying 8-bit data.
pub(crate) fn array_from_samples<'py>(
    py: Python<'py>,
    width: u32,
    height: u32,
    channels: u8,
    depth: u8,
    data: Vec<u8>,
) -> PyResult<Bound<'py, PyAny>> {
    shaped_array(py, depth, data, image_shape(width, height, channels))
}

/// A NumPy array of shape `shape` over decoded samples of `depth` bits (see
/// [`array_from_samples`]).
pub(crate) fn shaped_array<'py>(
    py: Python<'py>,
    depth: u8,
    data: Vec<u8>,
    shape: Vec<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(if depth == 16 {
        let v: Vec<u16> = data
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect();
        PyArray1::from_vec(py, v).reshape(shape)?.into_any()
    } else {
        PyArray1::from_vec(py, data).reshape(shape)?.into_any()
    })
}

/// Raw pointer and length of a buffer that stays alive and unaliased while the GIL is
/// released (the caller holds a NumPy read-write borrow of it for that time).
pub(crate) struct SendSlice<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the buffer is owned by a NumPy array the caller keeps alive and exclusively borrowed
// (a `PyReadwriteArray`) until the closure that uses this slice returns.
unsafe impl<T: Send> Send for SendSlice<T> {}

impl<T> SendSlice<T> {
    pub fn new(slice: &mut [T]) -> Self {
        SendSlice {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
        }
    }

    /// # Safety
    /// The buffer must still be alive and not otherwise borrowed (see the type's docs).
    pub unsafe fn get(&mut self) -> &mut [T] {
        // SAFETY: by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
