//! Arrays as NumPy `.npy` files (format version 1.0: the magic, a little-endian u16 header
//! length, a Python dict literal padded with spaces to a multiple of 64 bytes and ended by a
//! newline, then the elements in C order).

use super::model::NdArray;

/// The `.npy` file of `array`. bfloat16 elements are written as their bit patterns (`<u2`).
pub fn to_npy(array: &NdArray) -> Vec<u8> {
    let dims: Vec<String> = array.shape().iter().map(u32::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        array.dtype().numpy_descr()
    );
    // magic (6) + version (2) + length (2) + header + '\n', to a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + array.bytes().len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(array.bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    #[test]
    fn header_bytes() {
        let a = NdArray::new(DType::Int16, vec![2, 3], vec![0; 12]).unwrap();
        let npy = to_npy(&a);
        let header = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }";
        assert_eq!(&npy[..8], b"\x93NUMPY\x01\x00");
        let len = u16::from_le_bytes([npy[8], npy[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        assert_eq!(&npy[10..10 + header.len()], header.as_bytes());
        assert!(npy[10 + header.len()..10 + len - 1]
            .iter()
            .all(|&b| b == b' '));
        assert_eq!(npy[10 + len - 1], b'\n');
        assert_eq!(npy.len(), 10 + len + 12);
        let one = to_npy(&NdArray::from_f32(vec![4], &[0.0; 4]).unwrap());
        assert!(one.windows(20).any(|w| w == b"'shape': (4,), }    "));
    }
}
