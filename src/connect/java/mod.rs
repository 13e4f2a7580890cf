//! What the JVM prints: numbers (`float`) and dates (`date`), exactly.

pub mod date;
pub mod float;
