//! The stub's declarations pyo3-stub-gen's attributes do not make (feature `stubs`, `make stubs`):
//! the named records' classes (their fields' list types), the module's constants as `Final`, its
//! docstring, and `stub_info`, which the stub_gen binary prints.

use pyo3_stub_gen::{PyStubType, StubInfo, TypeInfo};

pyo3_stub_gen::module_doc!(
    "dumpfilter._core",
    "{}",
    "The compiled core (core/, Rust + PyO3): the per-event byte work behind one extension module.
Calls are made per buffer, never per event; unit records come back packed (little-endian u64
words) for memoryview, and the calls' results as named, frozen records read by field.
Generated from core/src/python/ by `make stubs` (pyo3-stub-gen); tests/test_layout.py checks it
is what the Rust makes, `make lint`'s stubtest that each name, parameter (name, kind, default)
and class (final at run time) is the binding's."
);

/// What dumpfilter._core declares, gathered from every attribute of the crate.
pub fn stub_info() -> pyo3_stub_gen::Result<StubInfo> {
    StubInfo::from_project_root(
        "dumpfilter._core".into(),
        env!("CARGO_MANIFEST_DIR").into(),
        false,
        Default::default(),
    )
}

/// A module constant's stub type: `Final[int]`.
pub(super) struct FinalInt;

impl PyStubType for FinalInt {
    fn type_output() -> TypeInfo {
        TypeInfo::with_module("typing.Final[builtins.int]", "typing".into())
    }
}

/// A record's class for the stub (see results::records): its docstring, a property per field
/// (typed `$stub` where given, else by its Rust type).
macro_rules! record {
    ($name:ident = $py:literal, [$($doc:literal),*] {
        $($field:ident: $ty:ty $(as $stub:ty)?, [$($fdoc:literal),*];)*
    }) => {
        impl ::pyo3_stub_gen::PyStubType for $name {
            fn type_output() -> ::pyo3_stub_gen::TypeInfo {
                ::pyo3_stub_gen::TypeInfo::locally_defined($py, "dumpfilter._core".into())
            }
        }

        ::pyo3_stub_gen::inventory::submit! {
            ::pyo3_stub_gen::type_info::PyClassInfo {
                struct_id: ::std::any::TypeId::of::<$name>,
                pyclass_name: $py,
                module: Some("dumpfilter._core"),
                doc: concat!($($doc, "\n"),*),
                getters: &[$(::pyo3_stub_gen::type_info::MemberInfo {
                    name: stringify!($field),
                    r#type: <super::stubs::stub_type!($ty $(as $stub)?) as ::pyo3_stub_gen::PyStubType>::type_output,
                    doc: concat!($($fdoc, "\n"),*),
                    default: None,
                    deprecated: None,
                }),*],
                setters: &[],
                bases: &[],
                has_eq: false,
                has_ord: false,
                has_hash: false,
                has_str: false,
                subclass: false,
            }
        }
    };
}

/// A field's stub type: the one after `as`, else its own.
macro_rules! stub_type {
    ($ty:ty) => {
        $ty
    };
    ($ty:ty as $stub:ty) => {
        $stub
    };
}

pub(super) use {record, stub_type};

/// `RelayResult.out`'s stub type: the buffer given, a view of it, or bytes.
pub(super) struct BytesOrView;

impl PyStubType for BytesOrView {
    fn type_output() -> TypeInfo {
        TypeInfo::unqualified("bytes | memoryview")
    }
}
