// Predictors, the same as src/fast/predict.rs: a = upper-left, b = upper, c = upper-right.
// Predictor ids: 0 none, 1 up, 2 L3 Paeth, 3 up-mean.

fn abs_diff(x: u32, y: u32) -> u32 {
    return select(y - x, x - y, x >= y);
}

fn predict_one(predictor: u32, a: u32, b: u32, c: u32) -> u32 {
    switch predictor {
        case 1u: {
            return b;
        }
        case 2u: {
            // p = a + c - b; |p - a| = |c - b|, |p - c| = |a - b|, |p - b| = |a + c - 2b|.
            let da = abs_diff(c, b);
            let dc = abs_diff(a, b);
            let db = abs_diff(a + c, 2u * b);
            if (da <= db && da <= dc) {
                return a;
            }
            if (db <= dc) {
                return b;
            }
            return c;
        }
        case 3u: {
            return (a + c) >> 1u;
        }
        default: {
            return 0u;
        }
    }
}
