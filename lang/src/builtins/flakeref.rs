//! Primops: flakeref (being written).

use crate::value::PrimOp;

pub(crate) static BUILTINS: &[PrimOp] = &[];
