//! Nothing of the host reaches code by any route, over a real server
//! process: a program that builds the raw native modules itself
//! (`sys.modules.pop` then `_imp.create_builtin`, `_random` and `_uuid`
//! imported directly) sees the virtual kernel and clock, the execution's
//! entropy and the fence's refusals, and what it saw before a pause is
//! seen again when the server is killed (`SIGKILL`) and the pause resumed
//! by replay: a host value would make the replay call the tool with other
//! input, and the execution would fail as nondeterministic.

mod common;

use common::server::{Server, continue_across_restarts, weather_tools};
use serde_json::json;

const RAW_MODULES: &str = r#"
import sys, _imp, importlib.machinery as machinery
sys.modules.pop('posix', None)
posix = _imp.create_builtin(machinery.ModuleSpec('posix', None))
import _random
seen = [posix.times().elapsed, tuple(posix.uname())[:4], _random.Random().random()]
again = _random.Random()
again.seed()
seen.append(again.random())
try:
    import _uuid
    seen.append(_uuid.generate_time_safe()[0].hex())
except ImportError:
    seen.append('no _uuid')
for name in ('fork', 'kill', 'pipe', 'dup', 'setuid'):
    try:
        getattr(posix, name)(0)
        seen.append(name + ' ran')
    except PermissionError as error:
        seen.append(str(error))
w = await get_weather(city=repr(seen))
print(seen[0] >= 1000.0, seen[1])
print(*seen[4:], sep='\n')
"#;

#[test]
fn raw_native_modules_show_nothing_of_the_host_and_replay_the_same() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut server = Server::start(dir.path(), &[]);
    let (status, reply) = server.post(
        "/exec/programmatic",
        &json!({"code": RAW_MODULES, "tools": weather_tools()}),
    );
    assert_eq!(
        (status, reply["status"].as_str()),
        (200, Some("tool_call_required")),
        "{reply}"
    );
    let (done, rounds) = continue_across_restarts(&mut server, reply);
    assert_eq!(rounds, 1);
    assert_eq!(done["status"], "completed", "{done}");
    let refused = |name: &str| format!("[Errno 1] os.{name} is not available in baton");
    let expected = [
        "True ('Linux', 'baton', '6.0.0', '#1 SMP')".to_owned(),
        "no _uuid".to_owned(),
        refused("fork"),
        refused("kill"),
        refused("pipe"),
        refused("dup"),
        refused("setuid"),
    ]
    .join("\n")
        + "\n";
    assert_eq!(done["stdout"].as_str(), Some(expected.as_str()), "{done}");
}
