//! The `time` module code sees: the interpreter's own, with every function
//! that reads a host clock or sleeps replaced by one on the execution's
//! virtual clock (the bridge's `clock` and `sleep`), merged and registered
//! as [`super::merged_module`] says.
//!
//! Invariants:
//! - No route gives code a `time` that reads a host clock.
//! - Each replaced function reads the virtual clock as often as the
//!   runtime's former Python patch did (once per call), so the journals of
//!   earlier runs replay the same.
//! - The functions of the time of a given argument (`gmtime(t)`,
//!   `mktime`, `strftime(f, t)`, `strptime`, ...) are the interpreter's
//!   own, called unbound.

use rustpython_vm::builtins::PyModuleDef;
use rustpython_vm::function::FuncArgs;
use rustpython_vm::{Context, PyObjectRef, PyResult, VirtualMachine, pymodule};

use super::merged_module;

/// The virtual `time` definition, made from the interpreter's own one in
/// `defs`; `None` when the interpreter has none (then nothing to replace).
pub fn module_def(ctx: &Context, defs: &[&'static PyModuleDef]) -> Option<&'static PyModuleDef> {
    let native = merged_module::native(defs, "time")?;
    NATIVE.with(|slot| slot.set(Some(native)));
    // The interpreter's own set-up stays: `tzset`, `struct_time`, the
    // constants.
    Some(merged_module::merge(
        ctx,
        native,
        &[clock_functions::METHOD_DEFS],
    ))
}

thread_local! {
    /// The interpreter's own definition, whose functions of a given time
    /// the virtual ones call.
    static NATIVE: std::cell::Cell<Option<&'static PyModuleDef>> = const { std::cell::Cell::new(None) };
}

/// Calls the interpreter's own `time.<name>` unbound (never given to code).
fn call_native(name: &str, args: FuncArgs, vm: &VirtualMachine) -> PyResult {
    let method = NATIVE
        .with(std::cell::Cell::get)
        .and_then(|def| def.methods.iter().find(|method| method.name == name))
        .ok_or_else(|| vm.new_system_error(format!("time.{name} is missing")))?;
    let function: PyObjectRef = method.to_function().into_ref(&vm.ctx).into();
    function.call(args, vm)
}

// Generated items the merged definition does not use (its own
// `module_def`, `module_exec`).
#[allow(dead_code)]
#[pymodule(name = "time")]
pub(crate) mod clock_functions {
    use rustpython_vm::function::{FuncArgs, OptionalArg, OptionalOption};
    use rustpython_vm::{AsObject, PyObjectRef, PyResult, VirtualMachine};

    use super::call_native;
    use crate::vm::bridge::{read_clock, virtual_sleep};

    /// The virtual wall clock, seconds since the epoch.
    fn wall() -> f64 {
        read_clock(0)
    }

    /// The virtual monotonic clock, seconds.
    fn steady() -> f64 {
        read_clock(1)
    }

    /// Nanoseconds, as the runtime's patch computed them.
    fn nanos(seconds: f64) -> i64 {
        (seconds * 1_000_000_000.0) as i64
    }

    #[pyfunction]
    fn time() -> f64 {
        wall()
    }

    #[pyfunction]
    fn time_ns() -> i64 {
        nanos(wall())
    }

    #[pyfunction]
    fn monotonic() -> f64 {
        steady()
    }

    #[pyfunction]
    fn monotonic_ns() -> i64 {
        nanos(steady())
    }

    #[pyfunction]
    fn perf_counter() -> f64 {
        steady()
    }

    #[pyfunction]
    fn perf_counter_ns() -> i64 {
        nanos(steady())
    }

    /// The code's own CPU time is the time it has run: the monotonic clock.
    #[pyfunction]
    fn process_time() -> f64 {
        steady()
    }

    #[pyfunction]
    fn process_time_ns() -> i64 {
        nanos(steady())
    }

    #[pyfunction]
    fn thread_time() -> f64 {
        steady()
    }

    #[pyfunction]
    fn thread_time_ns() -> i64 {
        nanos(steady())
    }

    /// The wall clock for `CLOCK_REALTIME` and its coarse and TAI forms,
    /// the monotonic one for every other id.
    #[pyfunction]
    fn clock_gettime(clock_id: i32) -> f64 {
        if matches!(clock_id, 0 | 5 | 11) {
            wall()
        } else {
            steady()
        }
    }

    #[pyfunction]
    fn clock_gettime_ns(clock_id: i32) -> i64 {
        nanos(clock_gettime(clock_id))
    }

    /// Sleeps live, or advances the clock in a replay; the argument is
    /// checked as the interpreter's own `sleep` checks it.
    #[pyfunction]
    fn sleep(seconds: PyObjectRef, vm: &VirtualMachine) -> PyResult<()> {
        let type_name = seconds.class().name().to_owned();
        let duration = seconds
            .try_into_value::<core::time::Duration>(vm)
            .map_err(|error| {
                if error.class().is(vm.ctx.exceptions.type_error) {
                    vm.new_type_error(format!(
                        "'{type_name}' object cannot be interpreted as an integer or float"
                    ))
                } else if error.class().is(vm.ctx.exceptions.value_error) {
                    vm.new_value_error("sleep length must be non-negative")
                } else {
                    error
                }
            })?;
        virtual_sleep(duration.as_secs_f64());
        Ok(())
    }

    /// `seconds`, or the virtual time now when it is missing or `None`.
    fn seconds_or_now(seconds: OptionalOption<PyObjectRef>, vm: &VirtualMachine) -> PyObjectRef {
        seconds
            .flatten()
            .unwrap_or_else(|| vm.ctx.new_float(wall()).into())
    }

    #[pyfunction]
    fn gmtime(seconds: OptionalOption<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
        call_native(
            "gmtime",
            FuncArgs::from(vec![seconds_or_now(seconds, vm)]),
            vm,
        )
    }

    #[pyfunction]
    fn localtime(seconds: OptionalOption<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
        call_native(
            "localtime",
            FuncArgs::from(vec![seconds_or_now(seconds, vm)]),
            vm,
        )
    }

    #[pyfunction]
    fn ctime(seconds: OptionalOption<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
        call_native(
            "ctime",
            FuncArgs::from(vec![seconds_or_now(seconds, vm)]),
            vm,
        )
    }

    /// `moment`, or the local time now when it is missing.
    fn moment_or_now(moment: OptionalArg<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
        match moment {
            OptionalArg::Present(moment) => Ok(moment),
            OptionalArg::Missing => localtime(OptionalArg::Missing, vm),
        }
    }

    #[pyfunction]
    fn asctime(moment: OptionalArg<PyObjectRef>, vm: &VirtualMachine) -> PyResult {
        let moment = moment_or_now(moment, vm)?;
        call_native("asctime", FuncArgs::from(vec![moment]), vm)
    }

    #[pyfunction]
    fn strftime(
        format: PyObjectRef,
        moment: OptionalArg<PyObjectRef>,
        vm: &VirtualMachine,
    ) -> PyResult {
        let moment = moment_or_now(moment, vm)?;
        call_native("strftime", FuncArgs::from(vec![format, moment]), vm)
    }
}
