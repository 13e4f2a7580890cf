//! What the JVM does exactly: printing numbers (`float`) and dates (`date`), `HashMap`'s iteration
//! order (`hashmap`), and `Matcher`'s replacement syntax (`replace`).

pub mod date;
pub mod decimal;
pub mod float;
pub mod hashmap;
pub mod replace;
