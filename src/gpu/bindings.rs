//! The check every stage runs on its plan before it creates a bind group: each range it will
//! bind lies inside its buffer, on the device's offset alignment, within the device's binding
//! and buffer limits. wgpu reports a bad binding as a validation error (by default a panic);
//! here a range the device cannot hold is a [`LimitsError::GpuBuffer`] and a range outside its
//! buffer (a planning bug) an [`Error::Gpu`] naming it, before anything is submitted. The
//! planners are pure functions of their inputs and these limits, so `fuzz/fuzz_targets/gpu_plan.rs`
//! runs them on hostile inputs without a GPU.

use crate::error::{Error, LimitsError, Result};

/// The device limits that decide where buffers and bindings may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindLimits {
    /// `max_storage_buffer_binding_size`.
    pub max_binding: u64,
    /// `max_buffer_size`.
    pub max_buffer: u64,
    /// `min_storage_buffer_offset_alignment` (a power of two).
    pub storage_align: u64,
}

impl BindLimits {
    /// The limits of `device`.
    pub fn of(device: &wgpu::Device) -> Self {
        let l = device.limits();
        BindLimits {
            max_binding: l.max_storage_buffer_binding_size,
            max_buffer: l.max_buffer_size,
            storage_align: (l.min_storage_buffer_offset_alignment as u64).max(4),
        }
    }
}

/// A storage range a stage binds: `size` bytes at `offset` of a buffer of `buffer_len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// What is bound (for the error).
    pub what: &'static str,
    /// Bytes of the buffer it is bound from.
    pub buffer_len: u64,
    /// Byte offset of the range.
    pub offset: u64,
    /// Bytes of the range.
    pub size: u64,
    /// A buffer copy's range rather than a binding: no binding-size limit, 4-byte alignment.
    pub copy: bool,
}

impl Binding {
    /// A whole buffer of `size` bytes, bound from its start.
    pub fn whole(what: &'static str, size: u64) -> Self {
        Binding {
            what,
            buffer_len: size,
            offset: 0,
            size,
            copy: false,
        }
    }
}

/// Checks every binding against its buffer and `limits` (see the module docs).
pub fn check_bindings(
    bindings: impl IntoIterator<Item = Binding>,
    limits: &BindLimits,
) -> Result<()> {
    for b in bindings {
        let max_range = if b.copy { u64::MAX } else { limits.max_binding };
        let align = if b.copy { 4 } else { limits.storage_align };
        for (what, needed, max) in [
            (b.what, b.size, max_range),
            (b.what, b.buffer_len, limits.max_buffer),
        ] {
            if needed > max {
                return Err(LimitsError::GpuBuffer { what, needed, max }.into());
            }
        }
        let inside = b
            .offset
            .checked_add(b.size)
            .is_some_and(|end| end <= b.buffer_len);
        if b.size == 0 || b.size % 4 != 0 || b.offset % align != 0 || !inside {
            return Err(Error::Gpu(format!(
                "internal: {} binding of {} bytes at {} does not fit its buffer of {} bytes \
                 (alignment {align})",
                b.what, b.size, b.offset, b.buffer_len
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BindLimits = BindLimits {
        max_binding: 1 << 20,
        max_buffer: 1 << 22,
        storage_align: 256,
    };

    fn b(buffer_len: u64, offset: u64, size: u64) -> Binding {
        Binding {
            what: "test",
            buffer_len,
            offset,
            size,
            copy: false,
        }
    }

    #[test]
    fn bindings_inside_their_buffer_pass_and_every_other_kind_fails() {
        assert!(check_bindings([b(512, 0, 512), b(1024, 256, 4)], &LIMITS).is_ok());
        // The field-runs bug: a 4-byte range at the very end of a 256-byte buffer.
        for bad in [b(256, 256, 4), b(256, 0, 0), b(256, 0, 6), b(512, 4, 4)] {
            assert!(
                matches!(check_bindings([bad], &LIMITS), Err(Error::Gpu(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            check_bindings([b(u64::MAX, u64::MAX - 3, 4)], &LIMITS),
            Err(Error::Limits(_))
        ));
        assert!(matches!(
            check_bindings([b(1 << 21, 0, 1 << 21)], &LIMITS),
            Err(Error::Limits(_))
        ));
        // A copy may be larger than a binding, and needs 4-byte alignment only.
        let copy = Binding {
            copy: true,
            ..b(1 << 21, 4, (1 << 21) - 4)
        };
        assert!(check_bindings([copy], &LIMITS).is_ok());
    }
}
