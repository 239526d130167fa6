pub(super) mod image;
pub(super) mod interest;
pub mod modules;
pub mod sites;
pub(super) mod symbols;
