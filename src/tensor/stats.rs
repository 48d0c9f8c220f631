//! Normalisation statistics of float arrays: count, mean and the sum of squared deviations
//! over the finite, non-fill values, per array and merged exactly in a fixed order (Chan et
//! al.'s pairwise update), so a dataset's statistics do not depend on how it was resumed.

use super::model::NdArray;

/// Count, mean and sum of squared deviations of some values.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "dataset", derive(serde::Serialize, serde::Deserialize))]
pub struct Moments {
    /// Values counted.
    pub count: u64,
    /// Their mean (0 without values).
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Moments {
    /// The moments of `array`'s finite values whose bits are not `fill` (two passes over
    /// the array, in f64); `None` for an integer array.
    pub fn of_array(array: &NdArray, fill: Option<u64>) -> Option<Self> {
        if !array.dtype().is_float() {
            return None;
        }
        let counted = |i: usize| {
            let v = array.float_at(i).expect("a float array");
            (v.is_finite() && fill != Some(array.bits_at(i))).then_some(v)
        };
        let (mut count, mut sum) = (0u64, 0f64);
        for v in (0..array.len()).filter_map(counted) {
            count += 1;
            sum += v;
        }
        if count == 0 {
            return Some(Moments::default());
        }
        let mean = sum / count as f64;
        let m2 = (0..array.len())
            .filter_map(counted)
            .map(|v| (v - mean) * (v - mean))
            .sum();
        Some(Moments { count, mean, m2 })
    }

    /// Adds `other`'s values to these (Chan et al.'s pairwise merge).
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n = self.count + other.count;
        let delta = other.mean - self.mean;
        let (na, nb) = (self.count as f64, other.count as f64);
        self.mean += delta * nb / n as f64;
        self.m2 += other.m2 + delta * delta * na * nb / n as f64;
        self.count = n;
    }

    /// The population standard deviation (0 without values).
    pub fn std(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.m2 / self.count as f64).sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_moments_equal_one_pass() {
        let values: Vec<f32> = (0..1000)
            .map(|i| ((i * 37 % 101) as f32).sqrt() - 3.0)
            .collect();
        let whole =
            Moments::of_array(&NdArray::from_f32(vec![1000], &values).unwrap(), None).unwrap();
        let mut merged = Moments::default();
        for part in values.chunks(170) {
            let a = NdArray::from_f32(vec![part.len() as u32], part).unwrap();
            merged.merge(&Moments::of_array(&a, None).unwrap());
        }
        assert_eq!(merged.count, 1000);
        assert!((merged.mean - whole.mean).abs() < 1e-12 * whole.mean.abs().max(1.0));
        assert!((merged.std() - whole.std()).abs() < 1e-12 * whole.std());
    }

    #[test]
    fn fill_and_non_finite_are_left_out() {
        let a = NdArray::from_f32(vec![5], &[1.0, f32::NAN, -9.0, 3.0, f32::INFINITY]).unwrap();
        let m = Moments::of_array(&a, Some((-9f32).to_bits() as u64)).unwrap();
        assert_eq!((m.count, m.mean, m.std()), (2, 2.0, 1.0));
    }
}
