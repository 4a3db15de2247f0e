//! Prints dumpfilter._core's stub from the core's pyo3-stub-gen attributes (`make stubs` writes it
//! to dumpfilter/_core.pyi; tests/test_layout.py checks the committed one against it).

fn main() -> pyo3_stub_gen::Result<()> {
    let info = _core::stub_info()?;
    print!(
        "{}",
        info.modules["dumpfilter._core"].format_with_config(false)
    );
    Ok(())
}
