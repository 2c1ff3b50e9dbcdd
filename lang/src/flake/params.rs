//! (in progress)
pub struct ParamDecl;
pub enum ParamType {}
pub enum ParamValue {}
