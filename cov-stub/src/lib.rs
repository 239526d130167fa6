//! The load and store callbacks that clang's
//! `-fsanitize-coverage=trace-loads,trace-stores` calls, doing nothing: a
//! program built with `locksuit cc` links against this library so it runs
//! as it always did without the shim. Under `LD_PRELOAD=libsyncshim.so`
//! the shim's callbacks of the same names come first in the lookup order
//! and record the accesses instead.

macro_rules! nothing {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_address: *const u8) {}
    )*};
}

nothing!(
    __sanitizer_cov_load1,
    __sanitizer_cov_load2,
    __sanitizer_cov_load4,
    __sanitizer_cov_load8,
    __sanitizer_cov_load16,
    __sanitizer_cov_store1,
    __sanitizer_cov_store2,
    __sanitizer_cov_store4,
    __sanitizer_cov_store8,
    __sanitizer_cov_store16
);
