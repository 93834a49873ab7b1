"""baton's shell: the command lines clients send as `lang: "bash"`, run
inside the child over the same virtual `/mnt/data` as Python code, with no
host binary at all.

What it reads: words with single and double quotes, `$'...'` and
backslashes, `$VAR`, `${VAR}`, `$?`, `$#`, `$1`..., `"$@"`, `$(...)` and
backquotes, globs (`*.csv`, `[[:digit:]]`), `~`; `;`, newlines, `&&`,
`||`, `|`, `!`; redirections (`>`, `>>`, `<`, `2>`, `2>&1`, `>&2`, `&>`,
`&>>`, here-documents `<<WORD`, `<<'WORD'`, `<<-WORD`, here-strings
`<<<`); `if`/`elif`/`else`/`fi`, `for ... in ...; do ...; done`,
`while`/`until`, `break`/`continue`, `{ ...; }` and `( ... )`;
assignments (`NAME=value command` too), `export`, `set -e`/`-u`/`-o
pipefail`. Not read: `case`, functions, `$((...))`, `${VAR:-...}` and the
other parameter operators, `[[ ]]`: they answer a syntax error (status 2)
or `command not found`. What it runs: the commands of [`COMMANDS`] (the
file tools of coreutils that code and LibreChat use, `python3`/`python` on
the same interpreter, `echo`, `printf`, `test`, `read`...). Anything else
answers `bash: NAME: command not found` with status 127, as bash does.

As bash, it runs the text line by line: the commands before a syntax
error run. Each command of a pipeline runs to its end before the next
starts (there is no SIGPIPE), as a subshell when there are several.

It is written against `os` and `open` only, so it runs unchanged under
CPython on a real directory: `tests/shell/oracle.py` compares it with
real bash and coreutils (C locale) there.

Invariants:
- Every command works through `os`/`open`, so it can reach nothing the
  code could not: the fence and the virtual disk apply to it as to Python.
- Exit statuses are bash's: 0 success, 1 failure, 2 misuse or syntax,
  126/127 cannot run / not found, 128+n never (nothing is signalled).
- Messages are coreutils' and bash's own words in the C locale (file
  names quoted as coreutils quotes them).
"""

import sys
import os
import io
import re
import glob
import fnmatch
import posixpath
import base64
import builtins
import stat as _stat
import traceback
import linecache
import time

#: Set by the runtime: `compile` with baton's checks (nesting depth...).
compile_source = None
#: Set by the runtime: `(major, minor, micro)` `python3 --version` shows.
PYTHON_VERSION = sys.version_info[:3]


class ShellSyntaxError(Exception):
    """The command line does not parse: bash's status 2. `line`: the line
    bash quotes after the message, if any."""

    def __init__(self, message, line=None):
        Exception.__init__(self, message)
        self.line = line


class _ExitShell(Exception):
    """`exit N`, or `set -e` after a failure."""

    def __init__(self, status):
        Exception.__init__(self, status)
        self.status = status


class _LoopControl(Exception):
    """`break N` or `continue N`: `levels` loops still to leave."""

    def __init__(self, kind, levels):
        Exception.__init__(self, kind)
        self.kind, self.levels = kind, levels


# ------------------------------------------------------------------ lexing

_OPERATORS = ("&&", "||", ";;", "<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&", "2>&1",
              "|&", "|", "&", ";", "(", ")", "<", ">")
_RESERVED = {"if", "then", "elif", "else", "fi", "for", "in", "do", "done", "while",
             "until", "{", "}", "!", "case", "esac", "function"}


def _line_at(text, pos):
    """The line of `text` that `pos` is on (for a newline: the line it
    ends), as bash quotes it after a syntax error."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:len(text) if end < 0 else end]


class Word:
    """A word as written: segments of `(kind, text)`, kind one of `lit`
    (unquoted), `sq` (single-quoted), `dq` (double-quoted), `var` (a name),
    `cmd` (a command substitution)."""

    __slots__ = ("parts", "dquoted_vars")

    def __init__(self):
        self.parts = []

    def add(self, kind, text):
        if kind in ("lit", "sq", "dq") and self.parts and self.parts[-1][0] == kind:
            self.parts[-1] = (kind, self.parts[-1][1] + text)
        else:
            self.parts.append((kind, text))

    def plain(self):
        """The word's text when it has no expansion, else None."""
        if all(kind in ("lit", "sq", "dq") for kind, _ in self.parts):
            return "".join(text for _, text in self.parts)
        return None

    def quoted(self):
        return any(kind in ("sq", "dq") or kind.startswith("dq") for kind, _ in self.parts)


class Token:
    """`pos`: where the token starts in the text (for error messages)."""
    __slots__ = ("kind", "value", "heredoc", "pos")

    def __init__(self, kind, value, heredoc=None, pos=0):
        self.kind, self.value, self.heredoc, self.pos = kind, value, heredoc, pos

    def __repr__(self):
        return "Token(%s, %r)" % (self.kind, self.value)


class _HereDoc:
    __slots__ = ("delimiter", "strip_tabs", "expand", "body", "line")

    def __init__(self, delimiter, strip_tabs, expand):
        self.delimiter, self.strip_tabs, self.expand, self.body = delimiter, strip_tabs, expand, None
        self.line = 1


class Lexer:
    def __init__(self, text):
        self.text = text
        self.pos = 0
        self.pending = []
        self.warnings = []  # bash's parse-time warnings, shown by the runner

    def error(self, what):
        raise ShellSyntaxError(what)

    def tokens(self):
        """The tokens, lexed one at a time as the parser asks, so that the
        commands before a syntax error run first, as in bash. The bodies
        of here-documents are read at the newline that ends their line,
        before that newline is handed out."""
        expect_delimiter = None
        while True:
            token = self.next_token()
            if token is None:
                break
            if expect_delimiter is not None:
                if token.kind != "word":
                    shown = "newline" if token.kind == "newline" else token.value
                    if token.kind == "redir":
                        shown = token.value[1]
                    raise ShellSyntaxError("syntax error near unexpected token `%s'" % shown, self.line_at(token.pos))
                self.heredoc_of(expect_delimiter, token)
                expect_delimiter = None
            if token.kind == "op" and token.value in ("<<", "<<-"):
                expect_delimiter = token
            if token.kind == "newline" and self.pending:
                self.read_heredocs()
            yield token
        if expect_delimiter is not None:
            raise ShellSyntaxError("syntax error near unexpected token `newline'", self.line_at(expect_delimiter.pos))
        if self.pending:
            self.read_heredocs()

    def line_at(self, pos):
        return _line_at(self.text, pos)

    def heredoc_of(self, operator, word_token):
        word = word_token.value
        delimiter = "".join(text for _, text in word.parts)
        doc = _HereDoc(delimiter, operator.value == "<<-", not word.quoted())
        doc.line = self.text.count("\n", 0, operator.pos) + 1
        operator.heredoc = doc
        self.pending.append(doc)

    def read_heredocs(self):
        for doc in self.pending:
            lines = []
            while True:
                if self.pos >= len(self.text):
                    # bash warns and takes the rest: so do we
                    self.warnings.append("warning: here-document at line %d delimited by end-of-file (wanted `%s')"
                                         % (doc.line, doc.delimiter))
                    break
                end = self.text.find("\n", self.pos)
                line = self.text[self.pos:] if end < 0 else self.text[self.pos:end]
                self.pos = len(self.text) if end < 0 else end + 1
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check == doc.delimiter:
                    break
                lines.append(check if doc.strip_tabs else line)
            doc.body = "".join(line + "\n" for line in lines)
        self.pending = []

    def next_token(self):
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t":
                self.pos += 1
            elif c == "\\" and text.startswith("\\\n", self.pos):
                self.pos += 2
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                break
        start = self.pos
        if self.pos >= len(text):
            return None
        token = self.next_token_here()
        token.pos = start
        return token

    def next_token_here(self):
        text = self.text
        c = text[self.pos]
        if c == "\n":
            self.pos += 1
            return Token("newline", "\n")
        # `2>`, `2>>`, `2>&1`, `1>`, `0<`...: a digit right before a redirection.
        m = re.match(r"([0-9])(>>|>&|>|<&|<)", text[self.pos:])
        if m:
            self.pos += len(m.group(0))
            return Token("redir", (int(m.group(1)), m.group(2)))
        for op in _OPERATORS:
            if op == "2>&1":
                continue
            if text.startswith(op, self.pos):
                self.pos += len(op)
                if op in ("<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&", "<", ">"):
                    if op in ("<<", "<<-"):
                        return Token("op", op)
                    return Token("redir", (None, op))
                return Token("op", op)
        return Token("word", self.word())

    def word(self):
        text = self.text
        word = Word()
        start = self.pos
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t\n;&|()<>":
                break
            if c == "\\":
                if self.pos + 1 < len(text):
                    if text[self.pos + 1] != "\n":
                        word.add("sq", text[self.pos + 1])
                    self.pos += 2
                else:
                    word.add("lit", "\\")
                    self.pos += 1
            elif c == "'":
                end = text.find("'", self.pos + 1)
                if end < 0:
                    self.error("unexpected EOF while looking for matching `''")
                word.add("sq", text[self.pos + 1:end])
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                self.double_quoted(word)
            elif c == "$" and text.startswith("$'", self.pos):
                end = self.ansi_c_end(self.pos + 2)
                word.add("sq", _ansi_c(text[self.pos + 2:end]))
                self.pos = end + 1
            elif c == "$":
                self.dollar(word, "")
            elif c == "`":
                word.add("cmd", self.backquoted())
            elif c == "~" and self.pos == start and text[self.pos + 1:self.pos + 2] in ("", "/") or (
                    c == "~" and self.pos == start and text[self.pos + 1] in " \t\n;&|()<>"):
                word.add("tilde", "~")  # `~user` stays as written: no user has a home here
                self.pos += 1

            else:
                word.add("lit", c)
                self.pos += 1
        return word

    def ansi_c_end(self, pos):
        """Where the `'` that closes a `$'...'` starting at `pos` is."""
        while pos < len(self.text):
            if self.text[pos] == "\\":
                pos += 2
            elif self.text[pos] == "'":
                return pos
            else:
                pos += 1
        self.error("unexpected EOF while looking for matching `''")

    def heredoc_word(self):
        """The whole text as a here-document's body: `$` and backquote
        expansions; a backslash quotes only `$`, backquote, `\\` and a
        newline (`\\"` stays as written)."""
        word = Word()
        self.expanding(word, "$`\\\n", None)
        return word

    def double_quoted(self, word):
        """The rest of a double-quoted part, up to its closing `"`."""
        self.expanding(word, '$`"\\\n', '"')

    def expanding(self, word, escapable, closing):
        """Reads text with `$` and backquote expansions into `word` (as
        double-quoted parts) up to `closing` (consumed), or to the end when
        it is None; a backslash quotes the characters of `escapable`."""
        text = self.text
        word.add("dq", "")
        while True:
            if self.pos >= len(text):
                if closing is None:
                    return
                self.error('unexpected EOF while looking for matching `"\'')
            c = text[self.pos]
            if c == closing:
                self.pos += 1
                return
            if c == "\\" and self.pos + 1 < len(text) and text[self.pos + 1] in escapable:
                if text[self.pos + 1] != "\n":
                    word.add("dq", text[self.pos + 1])
                self.pos += 2
            elif c == "$":
                self.dollar(word, "dq")
            elif c == "`":
                word.add("dqcmd", self.backquoted())
            else:
                word.add("dq", c)
                self.pos += 1

    def dollar(self, word, quoting):
        text = self.text
        rest = text[self.pos + 1:]
        prefix = "dq" if quoting else ""
        if rest.startswith("(("):
            self.error("arithmetic expansion $((...)) is not supported by baton's shell")
        if rest.startswith("("):
            self.pos += 2
            word.add(prefix + "cmd", self.balanced(")"))
            return
        if rest.startswith("{"):
            end = text.find("}", self.pos + 2)
            if end < 0:
                self.error("unexpected EOF while looking for matching `}'")
            name = text[self.pos + 2:end]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[?#@*$]", name):
                self.error("${%s}: bad substitution" % name)
            word.add(prefix + "var", name)
            self.pos = end + 1
            return
        m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9?#@*$]", rest)
        if m:
            word.add(prefix + "var", m.group(0))
            self.pos += 1 + len(m.group(0))
            return
        word.add("dq" if quoting else "lit", "$")
        self.pos += 1

    def balanced(self, close):
        """The text up to the `)` that closes `$(`, quotes respected."""
        text = self.text
        depth, start = 1, self.pos
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\\":
                self.pos += 2
                continue
            if c == "'":
                end = text.find("'", self.pos + 1)
                self.pos = len(text) if end < 0 else end + 1
                continue
            if c == '"':
                self.pos += 1
                while self.pos < len(text) and text[self.pos] != '"':
                    self.pos += 2 if text[self.pos] == "\\" else 1
                self.pos += 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    inner = text[start:self.pos]
                    self.pos += 1
                    return inner
            self.pos += 1
        self.error("unexpected EOF while looking for matching `)'")

    def backquoted(self):
        text = self.text
        self.pos += 1
        out = []
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\\" and self.pos + 1 < len(text) and text[self.pos + 1] in "$`\\":
                out.append(text[self.pos + 1])
                self.pos += 2
            elif c == "`":
                self.pos += 1
                return "".join(out)
            else:
                out.append(c)
                self.pos += 1
        self.error("unexpected EOF while looking for matching ``'")


# ----------------------------------------------------------------- parsing
#
# Nodes are tuples: ("list", [(and_or, terminator)]), ("and_or", first,
# [(op, pipeline)]), ("pipeline", negated, [command]), ("simple",
# assignments, words, redirections), ("if", [(cond, body)], else_body),
# ("for", name, words or None, body), ("while", until, cond, body),
# ("group", body, redirections), ("subshell", body, redirections).


class Parser:
    """Parses tokens as they come (a list or the lexer's generator):
    [`script`] the whole text, [`complete_command`] one line of it."""

    def __init__(self, tokens, text=""):
        self.stream = iter(tokens)
        self.tokens = []
        self.i = 0
        self.text = text

    def peek(self):
        while len(self.tokens) <= self.i:
            token = next(self.stream, None)
            if token is None:
                return None
            self.tokens.append(token)
        return self.tokens[self.i]

    def at_word(self, *values):
        t = self.peek()
        return t is not None and t.kind == "word" and t.value.plain() in values and not t.value.quoted()

    def at_op(self, *values):
        t = self.peek()
        return t is not None and t.kind == "op" and t.value in values

    def take(self):
        t = self.peek()
        self.i += 1
        return t

    def unexpected(self):
        t = self.peek()
        if t is None:
            raise ShellSyntaxError("syntax error: unexpected end of file")
        shown = "newline" if t.kind == "newline" else (
            "".join(x for _, x in t.value.parts) if t.kind == "word" else
            (t.value[1] if t.kind == "redir" else t.value))
        raise ShellSyntaxError("syntax error near unexpected token `%s'" % shown, self.line_of(t))

    def line_of(self, token):
        return _line_at(self.text, token.pos)

    def skip_newlines(self):
        while self.peek() is not None and self.peek().kind == "newline":
            self.i += 1

    def script(self):
        node = self.list_until((), required=False)
        if self.peek() is not None:
            self.unexpected()
        return node

    def complete_command(self):
        """The next line's commands (up to a newline outside any compound
        command), or None at the end of the text."""
        self.skip_newlines()
        if self.peek() is None:
            return None
        items = []
        while True:
            node = self.and_or()
            separated = self.at_op(";", "&")
            items.append((node, self.take().value if separated else ";"))
            t = self.peek()
            if t is None or t.kind == "newline":
                return ("list", items)
            if not separated:
                self.unexpected()

    def list_until(self, enders, required=True):
        """Commands up to one of `enders` (reserved words); `required`: at
        least one, as bash wants in `if`, `while`, `{ }`..."""
        items = []
        self.skip_newlines()
        if required and (self.peek() is None or self.at_word(*enders) or self.at_op(")", ";;")):
            self.unexpected()
        while self.peek() is not None and not self.at_word(*enders) and not self.at_op(")", ";;"):
            node = self.and_or()
            terminator = ";"
            if self.at_op(";", "&"):
                terminator = self.take().value
            elif self.peek() is not None and self.peek().kind == "newline":
                pass
            elif self.peek() is not None and not self.at_word(*enders) and not self.at_op(")"):
                self.unexpected()
            items.append((node, terminator))
            self.skip_newlines()
        return ("list", items)

    def and_or(self):
        first = self.pipeline()
        rest = []
        while self.at_op("&&", "||"):
            op = self.take().value
            self.skip_newlines()
            rest.append((op, self.pipeline()))
        return ("and_or", first, rest)

    def pipeline(self):
        """`[!] command [| command]...`; `|&` pipes stderr too."""
        negated = False
        while self.at_word("!"):
            self.take()
            negated = not negated
        commands = [self.command()]
        while self.at_op("|", "|&"):
            if self.take().value == "|&":
                both = Word()
                both.add("lit", "1")
                commands[-1][-1].append((2, ">&", both))  # as `2>&1`
            self.skip_newlines()
            commands.append(self.command())
        return ("pipeline", negated, commands)

    def command(self):
        t = self.peek()
        if t is None:
            self.unexpected()
        if t.kind == "word" and not t.value.quoted():
            name = t.value.plain()
            if name == "if":
                return self.redirected(self.if_clause())
            if name in ("for",):
                return self.redirected(self.for_clause())
            if name in ("while", "until"):
                return self.redirected(self.while_clause())
            if name == "{":
                self.take()
                body = self.list_until(("}",))
                self.expect_word("}")
                return self.redirected(("group", body))
            if name in ("case", "function", "select"):
                raise ShellSyntaxError("`%s' is not supported by baton's shell" % name)
            if name in ("then", "elif", "else", "fi", "do", "done", "}", "esac", "in"):
                self.unexpected()
        if t.kind == "op" and t.value == "(":
            self.take()
            body = self.list_until(())
            if not self.at_op(")"):
                self.unexpected()
            self.take()
            return self.redirected(("subshell", body))
        return self.simple()

    def redirected(self, node):
        redirections = []
        while self.peek() is not None and (self.peek().kind == "redir" or self.at_op("<<", "<<-")):
            redirections.append(self.redirection())
        return ("compound", node, redirections)

    def expect_word(self, value):
        if not self.at_word(value):
            self.unexpected()
        self.take()

    def if_clause(self):
        self.take()
        branches = []
        cond = self.list_until(("then",))
        self.expect_word("then")
        body = self.list_until(("elif", "else", "fi"))
        branches.append((cond, body))
        otherwise = None
        while True:
            if self.at_word("elif"):
                self.take()
                cond = self.list_until(("then",))
                self.expect_word("then")
                branches.append((cond, self.list_until(("elif", "else", "fi"))))
            elif self.at_word("else"):
                self.take()
                otherwise = self.list_until(("fi",))
            else:
                break
        self.expect_word("fi")
        return ("if", branches, otherwise)

    def for_clause(self):
        self.take()
        t = self.take()
        if t is None or t.kind != "word" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t.value.plain() or ""):
            raise ShellSyntaxError("`%s': not a valid identifier" % (t.value.plain() if t and t.kind == "word" else ""))
        name = t.value.plain()
        words = None
        self.skip_newlines()
        if self.at_word("in"):
            self.take()
            words = []
            while self.peek() is not None and self.peek().kind == "word":
                words.append(self.take().value)
        if self.at_op(";"):
            self.take()
        self.skip_newlines()
        self.expect_word("do")
        body = self.list_until(("done",))
        self.expect_word("done")
        return ("for", name, words, body)

    def while_clause(self):
        until = self.take().value.plain() == "until"
        cond = self.list_until(("do",))
        self.expect_word("do")
        body = self.list_until(("done",))
        self.expect_word("done")
        return ("while", until, cond, body)

    def redirection(self):
        t = self.take()
        if t.kind == "op":  # a here-document: its delimiter word follows
            self.take()
            return (0, t.value, t.heredoc)
        fd, op = t.value
        target = self.take()
        if target is None or target.kind != "word":
            if target is None:  # bash's text ends with a newline
                raise ShellSyntaxError("syntax error near unexpected token `newline'", self.line_of(t))
            self.i -= 1
            self.unexpected()
        return (fd, op, target.value)

    def simple(self):
        assignments, words, redirections = [], [], []
        while True:
            t = self.peek()
            if t is None:
                break
            if t.kind == "redir" or (t.kind == "op" and t.value in ("<<", "<<-")):
                redirections.append(self.redirection())
            elif t.kind == "word":
                text = t.value.parts[0][1] if t.value.parts and t.value.parts[0][0] == "lit" else ""
                m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", text)
                if not words and m:
                    self.take()
                    value = Word()
                    first = text[len(m.group(0)):]
                    if first == "~" and len(t.value.parts) == 1 or first.startswith("~/"):
                        value.add("tilde", "~")  # `x=~/dir`
                        first = first[1:]
                    if first:
                        value.add("lit", first)
                    value.parts.extend(t.value.parts[1:])
                    assignments.append((m.group(1), value))
                else:
                    words.append(self.take().value)
            else:
                break
        if not (assignments or words or redirections):
            self.unexpected()
        return ("simple", assignments, words, redirections)


# --------------------------------------------------------------- streams


class Sink:
    """Where a command writes: the shell's own stdout or stderr (text to
    the interpreter's stream), a pipe (bytes held), a file, or nothing."""

    def __init__(self, stream=None, fileobj=None):
        self.stream = stream
        self.fileobj = fileobj
        self.buffer = bytearray() if stream is None and fileobj is None else None

    def write(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if self.buffer is not None:
            self.buffer += data
        elif self.fileobj is not None:
            self.fileobj.write(data)
        else:
            self.stream.write(bytes(data).decode("utf-8", "replace"))
            flush = getattr(self.stream, "flush", None)
            if flush is not None:
                flush()
        return len(data)

    def value(self):
        return bytes(self.buffer or b"")


class _Discard(Sink):
    def __init__(self):
        Sink.__init__(self, fileobj=io.BytesIO())

    def write(self, data):
        return len(data)


class _TextSink(io.TextIOBase):
    """`sys.stdout` of a `python3` command: text into a [`Sink`]. With
    `buffered`, held until 8 KiB, `flush()` or the end, as CPython does
    with a stdout that is no terminal (so `2>&1` interleaves the same)."""

    LIMIT = 8192

    def __init__(self, sink, name, buffered=False):
        self.sink, self._name = sink, name
        self.pending = [] if buffered else None
        self.size = 0

    def flush(self):
        if self.pending:
            text, self.pending[:] = "".join(self.pending), []
            self.size = 0
            self.sink.write(text)

    @property
    def name(self):
        return self._name

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        if self.pending is None:
            self.sink.write(text)
            return len(text)
        self.pending.append(text)
        self.size += len(text)
        if self.size >= self.LIMIT:
            self.flush()
        return len(text)

    def isatty(self):
        return False

    @property
    def buffer(self):
        self.flush()
        return _BinarySink(self.sink)


class _BinarySink(io.RawIOBase):
    """`sys.stdout.buffer` of a `python3` command."""

    def __init__(self, sink):
        self.sink = sink

    def writable(self):
        return True

    def write(self, data):
        return self.sink.write(bytes(data))


# -------------------------------------------------------------- the shell


_GLOB_CLASSES = {"digit": "0-9", "alpha": "a-zA-Z", "alnum": "0-9a-zA-Z", "upper": "A-Z", "lower": "a-z",
                 "xdigit": "0-9a-fA-F", "space": " \t\n\r\f\v", "blank": " \t"}


def _glob_classes(pattern):
    """`[[:digit:]]` and its kin in a glob, as ranges Python's glob reads."""
    return re.sub(r"\[:([a-z]+):\]", lambda m: _GLOB_CLASSES.get(m.group(1), m.group(0)), pattern)


class Shell:
    def __init__(self, argv, stdout, stderr, home="/mnt/data"):
        self.args = list(argv)
        self.vars = {"HOME": home, "PWD": os.getcwd(), "USER": "user", "SHELL": "/bin/bash",
                     "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.exported = set(self.vars)
        self.loops = 0  # loops around the running command (`break`)
        self.nounset = False
        self.status = 0
        self.subst_status = None
        self.errexit = False
        self.pipefail = False
        self.stdout, self.stderr = stdout, stderr

    # -- expansion

    def var(self, name):
        if name == "?":
            return str(self.status)
        if name == "#":
            return str(len(self.args))
        if name in ("@", "*"):
            return " ".join(self.args)
        if name == "$":
            return "1"
        if name.isdigit():
            index = int(name)
            if index == 0:
                return "bash"
            if index <= len(self.args):
                return self.args[index - 1]
        elif name == "PWD":
            return os.getcwd()
        elif name in self.vars:
            return self.vars[name]
        if self.nounset:  # `set -u`: the shell stops (bash 5.2: 127, or 1 under `set -e`)
            self.stderr.write("bash: %s: unbound variable\n" % name)
            raise _ExitShell(1 if self.errexit else 127)
        return ""

    def substitute(self, text):
        """`$(text)`: its output without the trailing newlines. Like a
        subshell, it changes no variable or directory of this shell; its
        status is kept for an assignment-only command (`x=$(false)`)."""
        out = Sink()
        status = self.isolated(lambda: self.run_text(text, _Input(b""), out, self.stderr))
        self.subst_status = status
        return out.value().decode("utf-8", "replace").rstrip("\n")

    def isolated(self, body):
        """Runs `body()` as a subshell: variables, positional arguments,
        options and the directory are restored after, and `exit` ends only
        it. Returns its status."""
        saved = (os.getcwd(), dict(self.vars), set(self.exported), list(self.args),
                 self.errexit, self.pipefail, self.nounset, self.loops)
        self.loops = 0  # `break` in a subshell leaves no loop around it
        try:
            return body()
        except _ExitShell as e:
            return e.status
        finally:
            try:
                os.chdir(saved[0])
            except OSError:
                pass
            self.vars, self.exported, self.args, self.errexit, self.pipefail, self.nounset, self.loops = saved[1:]

    def environment(self):
        """The exported variables: the environment of a `python3`."""
        return {name: self.vars[name] for name in self.exported if name in self.vars}

    def fields(self, word):
        """The fields a word expands to: expansions, splitting of unquoted
        expansions, `"$@"` into one field per argument, and globs of
        unquoted `*?[`."""
        if any(part == ("dqvar", "@") for part in word.parts) and all(
                part == ("dqvar", "@") or part[0] in ("sq", "dq") and not part[1] for part in word.parts):
            return list(self.args)  # `"$@"`: one field per argument, none without
        fields = [[]]  # each field: list of (text, globbable)
        quoted_any = False
        for kind, text in word.parts:
            if kind == "tilde":
                fields[-1].append((self.vars.get("HOME", "/mnt/data"), False))
            elif kind == "lit":
                fields[-1].append((text, True))
            elif kind in ("sq", "dq"):
                quoted_any = True
                fields[-1].append((text, False))
            elif kind == "dqvar" and text == "@":
                for i, arg in enumerate(self.args):
                    if i:
                        fields.append([])
                    fields[-1].append((arg, False))
                    quoted_any = True
            elif kind in ("dqvar", "dqcmd"):
                quoted_any = True
                value = self.var(text) if kind == "dqvar" else self.substitute(text)
                fields[-1].append((value, False))
            elif kind in ("var", "cmd"):
                value = self.var(text) if kind == "var" else self.substitute(text)
                self.split_into(fields, value)
        out = []
        for field in fields:
            if not field:
                continue
            out.extend(self.glob_field(field))
        if not out and quoted_any:
            out.append("")
        return out

    @staticmethod
    def split_into(fields, value):
        """Adds an unquoted expansion's words to `fields` (split on
        blanks and newlines, bash's default IFS; globs in them expand)."""
        pieces = value.split()
        if not pieces:
            return
        if value[:1].isspace() and fields[-1]:
            fields.append([])
        for i, piece in enumerate(pieces):
            if i:
                fields.append([])
            fields[-1].append((piece, True))
        if value[-1:].isspace():
            fields.append([])

    @staticmethod
    def glob_field(field):
        """A field's pathname expansion: the sorted matches of its unquoted
        `*?[`, or the field itself when nothing matches."""
        text = "".join(t for t, _ in field)
        if any(g and any(ch in t for ch in "*?[") for t, g in field):
            pattern = "".join(_glob_classes(t) if g else glob.escape(t) for t, g in field)
            found = sorted(glob.glob(pattern), key=lambda p: p.encode("utf-8", "surrogateescape"))
            if found:
                return found
        return [text]

    def word_text(self, word):
        """A word expanded without splitting or globbing (assignments,
        redirection targets)."""
        parts = []
        for kind, text in word.parts:
            if kind == "tilde":
                parts.append(self.vars.get("HOME", "/mnt/data"))
            elif kind in ("var", "dqvar"):
                parts.append(self.var(text))
            elif kind in ("cmd", "dqcmd"):
                parts.append(self.substitute(text))
            else:
                parts.append(text)
        return "".join(parts)

    def heredoc_text(self, doc):
        """A here-document's body; with an unquoted delimiter, its `$`
        and backquote expansions done (a backslash quotes only `$`,
        backquote, `\\` and a newline there)."""
        if not doc.expand:
            return doc.body
        try:
            word = Lexer(doc.body).heredoc_word()
        except ShellSyntaxError:
            return doc.body
        return self.word_text(word)

    # -- running

    def run_text(self, text, stdin, stdout, stderr):
        tree = Parser(Lexer(text).tokens(), text).script()
        return self.run_list(tree, stdin, stdout, stderr)

    def run_list(self, node, stdin, stdout, stderr):
        status = 0
        for and_or, _terminator in node[1]:
            status = self.run_and_or(and_or, stdin, stdout, stderr)
        return status

    def run_and_or(self, node, stdin, stdout, stderr):
        _, first, rest = node
        status = self.run_pipeline(first, stdin, stdout, stderr)
        last_ran = not rest
        for i, (op, pipeline) in enumerate(rest):
            if (op == "&&" and status == 0) or (op == "||" and status != 0):
                status = self.run_pipeline(pipeline, stdin, stdout, stderr)
                last_ran = i == len(rest) - 1
            else:
                last_ran = False
        self.status = status
        last_pipeline = rest[-1][1] if rest else first
        if self.errexit and status != 0 and last_ran and not last_pipeline[1]:
            raise _ExitShell(status)
        return status

    def run_pipeline(self, node, stdin, stdout, stderr):
        """A pipeline; with more than one command, each runs as a subshell
        (a variable set in `... | while read x` is gone after, as in
        bash)."""
        _, negated, commands = node
        data = stdin
        statuses = []
        for i, command in enumerate(commands):
            last = i == len(commands) - 1
            out = stdout if last else Sink()
            if len(commands) == 1:
                statuses.append(self.run_command(command, data, out, stderr))
            else:
                statuses.append(self.isolated(lambda: self.run_command(command, data, out, stderr)))
            if not last:
                data = _Input(out.value())
        status = statuses[-1]
        if self.pipefail:
            failed = [s for s in statuses if s != 0]
            status = failed[-1] if failed else 0
        if negated:
            status = 0 if status else 1
        self.status = status
        return status

    def run_command(self, node, stdin, stdout, stderr):
        kind = node[0]
        if kind == "simple":
            return self.run_simple(node, stdin, stdout, stderr)
        if kind == "compound":
            _, inner, redirections = node
            opened = self.redirect(redirections, stdin, stdout, stderr)
            if opened is None:
                return 1
            stdin2, stdout2, stderr2, files = opened
            try:
                return self.run_compound(inner, stdin2, stdout2, stderr2)
            finally:
                for f in files:
                    f.close()
        return self.run_compound(node, stdin, stdout, stderr)

    def run_compound(self, node, stdin, stdout, stderr):
        kind = node[0]
        if kind == "group":
            return self.run_list(node[1], stdin, stdout, stderr)
        if kind == "subshell":
            return self.isolated(lambda: self.run_list(node[1], stdin, stdout, stderr))
        if kind == "if":
            _, branches, otherwise = node
            for cond, body in branches:
                if self.run_condition(cond, stdin, stdout, stderr) == 0:
                    return self.run_list(body, stdin, stdout, stderr)
            if otherwise is not None:
                return self.run_list(otherwise, stdin, stdout, stderr)
            return 0
        if kind == "for":
            _, name, words, body = node
            values = self.args if words is None else [f for w in words for f in self.fields(w)]
            status = 0
            for value in values:
                self.vars[name] = value
                status, stop = self.loop_body(body, stdin, stdout, stderr)
                if stop:
                    break
            return status
        if kind == "while":
            _, until, cond, body = node
            status = 0
            for _ in range(1_000_000):
                ok = self.run_condition(cond, stdin, stdout, stderr) == 0
                if ok == until:
                    break
                status, stop = self.loop_body(body, stdin, stdout, stderr)
                if stop:
                    break
            return status
        raise ShellSyntaxError("unknown construct")

    def loop_body(self, body, stdin, stdout, stderr):
        """One turn of a loop: (status, whether `break` ends the loop)."""
        self.loops += 1
        try:
            return self.run_list(body, stdin, stdout, stderr), False
        except _LoopControl as e:
            if e.levels > 1:
                e.levels -= 1
                raise
            return 0, e.kind == "break"
        finally:
            self.loops -= 1

    def run_condition(self, cond, stdin, stdout, stderr):
        errexit, self.errexit = self.errexit, False
        try:
            return self.run_list(cond, stdin, stdout, stderr)
        finally:
            self.errexit = errexit

    def redirect(self, redirections, stdin, stdout, stderr):
        """The streams after `redirections`, and the files to close; None
        when one cannot be opened (reported on stderr)."""
        fds = {0: stdin, 1: stdout, 2: stderr}
        files = []
        for fd, op, target in redirections:
            if op in ("<<", "<<-"):
                fds[0] = _Input(self.heredoc_text(target).encode("utf-8", "surrogateescape"))
                continue
            if op == "<<<":
                fds[0] = _Input((self.word_text(target) + "\n").encode("utf-8", "surrogateescape"))
                continue
            path = self.word_text(target)
            if op in (">&", "<&") and (path.isdigit() or path == "-"):
                source = int(path) if path.isdigit() else None
                if source not in fds:
                    stderr.write("bash: %s: Bad file descriptor\n" % path)
                    return None
                fds[1 if fd is None else fd] = fds[source]
                continue
            try:
                if op == "<":
                    with open(path, "rb") as f:
                        fds[0 if fd is None else fd] = _Input(f.read())
                    continue
                if path == "/dev/null":
                    sink = _Discard()
                elif path in ("/dev/stdout", "/dev/stderr"):
                    sink = fds[1 if path == "/dev/stdout" else 2]
                else:
                    f = open(path, "ab" if op in (">>", "&>>") else "wb")
                    files.append(f)
                    sink = Sink(fileobj=f)
            except OSError as e:
                stderr.write("bash: %s: %s\n" % (path, e.strerror or e))
                for f in files:
                    f.close()
                return None
            if op in ("&>", "&>>", ">&"):
                fds[1] = fds[2] = sink
            else:
                fds[1 if fd is None else fd] = sink
        return fds[0], fds[1], fds[2], files

    def run_simple(self, node, stdin, stdout, stderr):
        _, assignments, words, redirections = node
        self.subst_status = None
        argv = []
        for word in words:
            argv.extend(self.fields(word))
        values = [(name, self.word_text(value)) for name, value in assignments]
        if not argv:
            for name, value in values:
                self.vars[name] = value
            opened = self.redirect(redirections, stdin, stdout, stderr)
            if opened is None:
                return 1
            for f in opened[3]:
                f.close()
            return self.subst_status or 0
        opened = self.redirect(redirections, stdin, stdout, stderr)
        if opened is None:
            return 1
        stdin2, stdout2, stderr2, files = opened
        try:
            return self.with_assignments(values, lambda: self.call(argv, stdin2, stdout2, stderr2))
        finally:
            for f in files:
                try:
                    f.close()
                except OSError:
                    pass

    def with_assignments(self, values, body):
        """`NAME=value command`: the variables set and exported for the
        command only."""
        if not values:
            return body()
        saved = [(name, self.vars.get(name), name in self.exported) for name, _ in values]
        for name, value in values:
            self.vars[name] = value
            self.exported.add(name)
        try:
            return body()
        finally:
            for name, value, exported in saved:
                if value is None:
                    self.vars.pop(name, None)
                else:
                    self.vars[name] = value
                if not exported:
                    self.exported.discard(name)

    def call(self, argv, stdin, stdout, stderr):
        name = argv[0]
        command = COMMANDS.get(posixpath.basename(name) if posixpath.dirname(name) in ("/usr/bin", "/bin") else name)
        if command is None and "/" in name:
            return self.not_runnable(name, stderr)
        if command is None:
            stderr.write("bash: %s: command not found\n" % name)
            return 127
        if not isinstance(stdin, _Input):
            stdin = _Input(stdin)
        try:
            status = command(self, argv[1:], stdin, stdout, stderr)
        except _ExitShell:
            raise
        except _Usage as e:
            prefix = "bash: " if name in _SHELL_BUILTINS else ""
            stderr.write("%s%s: %s\n" % (prefix, name, e))
            if e.hint:
                stderr.write("Try '%s --help' for more information.\n" % name)
            return e.status
        except OSError as e:
            stderr.write("%s: %s\n" % (name, e.strerror or e))
            return 1
        return 0 if status is None else status


    @staticmethod
    def not_runnable(path, stderr):
        """A command named by a path: there are no programs to run here, only
        the commands of [`COMMANDS`]."""
        if not _exists(path):
            stderr.write("bash: %s: No such file or directory\n" % path)
            return 127
        stderr.write("bash: %s: %s\n" % (path, "Is a directory" if _is_dir(path) else "Permission denied"))
        return 126


class _Usage(Exception):
    """A command's own error line (`name: text`, `bash: name: text` for a
    builtin), with its status; `hint`: followed by coreutils' "Try 'name
    --help'" line."""

    def __init__(self, text, status=1, hint=False):
        Exception.__init__(self, text)
        self.status, self.hint = status, hint


class _Input:
    """A command's standard input: bytes that every reader shares, as
    commands share an open file (`while read` takes a line per turn, a
    `cat` in the loop the rest)."""

    def __init__(self, data=b""):
        self.data = bytes(data) if isinstance(data, (bytes, bytearray)) else b""
        self.pos = 0

    def read(self, size=-1):
        end = len(self.data) if size is None or size < 0 else min(len(self.data), self.pos + size)
        data, self.pos = self.data[self.pos:end], end
        return data

    def readline(self):
        end = self.data.find(b"\n", self.pos)
        return self.read(-1 if end < 0 else end + 1 - self.pos)


class _RawInput(io.RawIOBase):
    """`sys.stdin` of a `python3` under the shell: reads its [`_Input`]
    only as the code asks."""

    def __init__(self, source):
        io.RawIOBase.__init__(self)
        self.source = source

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self.source.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


# ---------------------------------------------------------------- helpers


def _options(args, flags, with_value=(), long={}, repeat=()):
    """Splits `-abc` style options off `args` (up to `--` or the first
    operand): (set of flags, dict of valued options, operands). The
    options in `repeat` keep every value, in a list. A `long` name maps
    to a flag, or, ending in `=`, to a valued option (`--include=`)."""
    seen, valued, rest = set(), {}, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i + 1:])
            break
        if arg.startswith("--") and len(arg) > 2:
            key, sep, value = arg[2:].partition("=")
            if key in long:
                seen.add(long[key])
                i += 1
                continue
            if key + "=" in long and sep:
                c = long[key + "="]
                valued.setdefault(c, []).append(value) if c in repeat else valued.__setitem__(c, value)
                i += 1
                continue
            raise _Usage("unrecognized option '%s'" % arg, hint=True)
        if arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                c = arg[j]
                if c in with_value:
                    value = arg[j + 1:]
                    if not value:
                        i += 1
                        if i >= len(args):
                            raise _Usage("option requires an argument -- '%s'" % c, hint=True)
                        value = args[i]
                    if c in repeat:
                        valued.setdefault(c, []).append(value)
                    else:
                        valued[c] = value
                    break
                if c not in flags:
                    raise _Usage("invalid option -- '%s'" % c, hint=True)
                seen.add(c)
                j += 1
            i += 1
            continue
        rest.append(arg)
        i += 1
    return seen, valued, rest


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def _why(error):
    return error.strerror or str(error)


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _is_regular(path):
    try:
        return _stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # an operand wc could not read counts for nothing


def _is_dir(path):
    try:
        return _stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


# coreutils' quoting of file names in messages (gnulib's quotearg, C
# locale): `_q` always quotes (`quoteaf`), `_qf` only when the name needs it
# (`quotef`).
_QUOTE_SAFE = frozenset(b"%+,-./0123456789:ABCDEFGHIJKLMNOPQRSTUVWXYZ]_abcdefghijklmnopqrstuvwxyz @")
_QUOTE_SPECIAL = frozenset(b' !"$&()*;<=>[^`|?\'\\')
_QUOTE_ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r"}


def _unprintable(c):
    return c < 0x20 or c >= 0x7f


def _needs_quotes(raw):
    """Whether gnulib's `shell-escape` style quotes this name."""
    if not raw:
        return True
    for i, c in enumerate(raw):
        if c in _QUOTE_SPECIAL or _unprintable(c):
            return True
        if c in b"{}" and len(raw) == 1 or c in b"#~" and i == 0:
            return True
    return False


def _quote_compatible(raw, i, c):
    """Whether byte `c` reads the same in double quotes (gnulib's
    `c_and_shell_quote_compat`)."""
    if c in b"{}":
        return len(raw) == 1
    if c in b"#~":
        return i == 0
    return c == 0x27 or (c in _QUOTE_SAFE or c not in _QUOTE_SPECIAL) and not _unprintable(c)


def _q(name):
    """A file name as coreutils quotes it: `'a b'`, `"it's"`,
    `'a'$'\\n''b'`."""
    raw = name.encode("utf-8", "surrogateescape")
    out, escaping, has_quote, compatible = ["'"], False, False, True
    for i, c in enumerate(raw):
        compatible = compatible and _quote_compatible(raw, i, c)
        if c == 0x27:
            out.append("'\\''")
            has_quote, escaping = True, False
        elif _unprintable(c):
            if not escaping:
                out.append("'$'")
                escaping = True
            out.append("\\" + _QUOTE_ESCAPES[c] if c in _QUOTE_ESCAPES else "\\%03o" % c)
        else:
            if escaping:
                out.append("''")
                escaping = False
            out.append(chr(c))
    if has_quote and compatible:
        return '"%s"' % name
    return "".join(out) + "'"


def _qf(name):
    """A file name quoted only when it needs it (`cat: a.txt: ...` but
    `cat: 'a b': ...`)."""
    return _q(name) if _needs_quotes(name.encode("utf-8", "surrogateescape")) else name


# --------------------------------------------------------------- commands


def _true(shell, args, stdin, out, err):
    return 0


def _false(shell, args, stdin, out, err):
    return 1


def _cat(shell, args, stdin, out, err):
    """`cat [-nbsEATetuv] [FILE]...`; line numbers and squeezing go on
    across files, as in GNU cat."""
    flags, _, files = _options(args, "nAbeEsTtuv", long={
        "number": "n", "number-nonblank": "b", "squeeze-blank": "s", "show-ends": "E",
        "show-tabs": "T", "show-all": "A", "show-nonprinting": "v"})
    for combined, parts in (("A", "vET"), ("e", "vE"), ("t", "vT")):
        if combined in flags:
            flags |= set(parts)
    state = {"number": 0, "line_start": True, "blanks": 0}
    status = 0
    for path in files or ["-"]:
        if path == "-":
            data = stdin.read()
        else:
            try:
                if _is_dir(path):
                    err.write("cat: %s: Is a directory\n" % _qf(path))
                    status = 1
                    continue
                data = _read_file(path)
            except OSError as e:
                err.write("cat: %s: %s\n" % (_qf(path), _why(e)))
                status = 1
                continue
        out.write(_cat_format(data, flags, state) if flags & set("nbsETv") else data)
    return status


def _cat_format(data, flags, state):
    """One file's bytes under cat's options; `state` carries the line
    count, whether a line has begun, and the run of blank lines."""
    out = []
    for line in data.splitlines(True):
        blank = state["line_start"] and line == b"\n"
        if state["line_start"]:
            state["blanks"] = state["blanks"] + 1 if blank else 0
            if "s" in flags and state["blanks"] > 1:
                continue
            if "b" in flags and not blank or "n" in flags and "b" not in flags:
                state["number"] += 1
                out.append(b"%6d\t" % state["number"])
        body, newline = (line[:-1], b"\n") if line.endswith(b"\n") else (line, b"")
        if "v" in flags:
            body = _cat_visible(body)
        if "T" in flags:
            body = body.replace(b"\t", b"^I")
        out.append(body + (b"$" if newline and "E" in flags else b"") + newline)
        state["line_start"] = bool(newline)
    return b"".join(out)


def _cat_visible(data):
    """`cat -v`: control bytes as `^X`, DEL as `^?`, high bytes as `M-`."""
    out = bytearray()
    for c in data:
        if c >= 128:
            out += b"M-"
            c -= 128
        if c == 9 or 32 <= c < 127:
            out.append(c)
        elif c == 127:
            out += b"^?"
        else:
            out += b"^" + bytes([c + 64])
    return bytes(out)


_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
            "v": "\v", "\\": "\\"}


def _unescape(text, stop_at_c=False):
    """Backslash escapes as `echo -e` and `printf`'s `%b` read them;
    (text, stopped) where stopped says a `\\c` ended the output."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            if n in _ESCAPES:
                out.append(_ESCAPES[n])
                i += 2
                continue
            if n == "c" and stop_at_c:
                return "".join(out), True
            if n == "0" or n in "01234567" and not stop_at_c:
                m = re.match(r"0?[0-7]{1,3}" if n == "0" else r"[0-7]{1,3}", text[i + 1:])
                digits = m.group(0)
                out.append(chr(int(digits, 8) & 0xFF))
                i += 1 + len(digits)
                continue
            if n == "x":
                m = re.match(r"[0-9a-fA-F]{1,2}", text[i + 2:])
                if m:
                    out.append(chr(int(m.group(0), 16)))
                    i += 2 + len(m.group(0))
                    continue
        out.append(c)
        i += 1
    return "".join(out), False


def _ansi_c(text):
    """The text of a `$'...'` word: C escapes (`\\n`, `\\t`, `\\xHH`,
    `\\NNN` octal, `\\'`...)."""
    out, i = [], 0
    while i < len(text):
        m = re.match(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", text[i:], re.S)
        if not m:
            out.append(text[i])
            i += 1
            continue
        octal, hexa, other = m.groups()
        if octal or hexa:
            out.append(chr(int(octal, 8) & 0xFF if octal else int(hexa, 16)))
        elif other in _ESCAPES or other in "'\"?":
            out.append(_ESCAPES.get(other, other))
        else:
            out.append("\\" + other)
        i += len(m.group(0))
    return "".join(out)


def _echo(shell, args, stdin, out, err):
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        for c in args[0][1:]:
            if c == "n":
                newline = False
            elif c == "e":
                escapes = True
            else:
                escapes = False
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text, stopped = _unescape(text, stop_at_c=True)
        if stopped:
            out.write(text)
            return 0
    out.write(text + ("\n" if newline else ""))
    return 0


def _printf(shell, args, stdin, out, err):
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        err.write("printf: usage: printf [-v var] format [arguments]\n")
        return 2
    fmt, values = args[0], args[1:]
    status = 0
    spec = re.compile(r"%([-+ #0]*)(\*|[0-9]+)?(?:\.(\*|[0-9]+))?([diouxXeEfFgGcsb%])")
    while True:
        used = 0
        pieces = []
        pos = 0
        for m in spec.finditer(fmt):
            pieces.append(_unescape(fmt[pos:m.start()])[0])
            pos = m.end()
            flags, width, precision, conv = m.groups()
            if conv == "%":
                pieces.append("%")
                continue

            def take():
                nonlocal used
                value = values[used] if used < len(values) else None
                used += 1
                return value

            if width == "*":
                width = take() or "0"
            if precision == "*":
                precision = take() or "0"
            value = take()
            pyfmt = "%" + flags + (width or "") + ("." + precision if precision is not None else "")
            if conv in "diouxXeEfFgG":
                number, ok = _printf_number(value or "0", conv in "eEfFgG")
                if not ok:
                    err.write("bash: printf: %s: invalid number\n" % value)
                    status = 1
                if conv in "xXou" and number < 0:
                    number &= 0xFFFFFFFFFFFFFFFF  # as C's unsigned conversions
                pieces.append((pyfmt + ("d" if conv in "iu" else conv)) % number)
            elif conv == "c":
                pieces.append((pyfmt + "s") % (value or "")[:1])
            elif conv == "b":
                text, stopped = _unescape(value or "", stop_at_c=True)
                pieces.append((pyfmt + "s") % text)
                if stopped:  # `\c` in a `%b` argument ends all output
                    out.write("".join(pieces))
                    return status
            else:
                pieces.append((pyfmt + "s") % (value or ""))
        pieces.append(_unescape(fmt[pos:])[0])
        out.write("".join(pieces))
        if used == 0 or used >= len(values):
            break
        values = values[used:]
    return status


_PRINTF_INTEGER = re.compile(r"\s*([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_PRINTF_FLOAT = re.compile(r"\s*[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf(?:inity)?|nan)", re.I)


def _printf_number(text, floating):
    """A `printf` argument as a number: (value, ok). As bash, it takes a
    leading number and complains about the rest (`3x` is 3, not ok);
    `'c` is the code of `c`."""
    if text[:1] in ("'", '"'):
        return (ord(text[1]) if len(text) > 1 else 0), True
    if floating:
        m = _PRINTF_FLOAT.match(text)
        value = float(m.group(0)) if m else 0.0
    else:
        m = _PRINTF_INTEGER.match(text)
        value = 0
        if m:
            digits = m.group(2)
            base = 16 if digits[1:2] in ("x", "X") else 8 if digits.startswith("0") and len(digits) > 1 else 10
            value = int(digits, base) * (-1 if m.group(1) == "-" else 1)
    return value, m is not None and m.end() == len(text)


def _mode_string(mode):
    kind = "d" if _stat.S_ISDIR(mode) else "-"
    bits = ""
    for who in (6, 3, 0):
        part = (mode >> who) & 7
        bits += ("r" if part & 4 else "-") + ("w" if part & 2 else "-") + ("x" if part & 1 else "-")
    return kind + bits


def _human(size):
    if size < 1024:
        return str(size)
    for unit in "KMGTPE":
        size /= 1024.0
        if size < 1024 or unit == "E":
            text = ("%.1f" % size) if size < 10 else "%d" % -(-size // 1)
            if size < 10:
                text = "%.1f" % (-(-size * 10 // 1) / 10)
            return text + unit
    return str(size)


def _ls(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "aAlh1dRrtSFp", long={"all": "a", "almost-all": "A",
                                                            "human-readable": "h"})
    status = 0
    files, dirs = [], []
    for path in paths or ["."]:
        try:
            st = os.stat(path)
        except OSError as e:
            err.write("ls: cannot access %s: %s\n" % (_q(path), _why(e)))
            status = 2
            continue
        (dirs if _stat.S_ISDIR(st.st_mode) and "d" not in flags else files).append((path, st))

    def order(items):
        items = sorted(items, key=lambda item: item[0].encode("utf-8", "surrogateescape"))
        if "t" in flags:
            items.sort(key=lambda item: -item[1].st_mtime_ns)
        elif "S" in flags:
            items.sort(key=lambda item: -item[1].st_size)
        if "r" in flags:
            items.reverse()
        return items

    def show(items, base):
        if "l" in flags:
            blocks = sum(-(-st.st_size // 1024) * (1 if _stat.S_ISREG(st.st_mode) else 4) for _, st in items)
            if base is not None:
                out.write("total %d\n" % blocks)
            for name, st in items:
                size = _human(st.st_size) if "h" in flags else str(st.st_size)
                when = time.strftime("%b %e %H:%M", time.gmtime(st.st_mtime))
                out.write("%s 1 user user %5s %s %s\n" % (_mode_string(st.st_mode), size, when, name + _suffix(st)))
        else:
            for name, st in items:
                out.write(name + _suffix(st) + "\n")

    def _suffix(st):
        if "F" in flags or "p" in flags:
            return "/" if _stat.S_ISDIR(st.st_mode) else ""
        return ""

    def listing(path):
        names = os.listdir(path)
        if "a" in flags:
            names = names + [".", ".."]
        elif "A" not in flags:
            names = [n for n in names if not n.startswith(".")]
        items = []
        for n in names:
            try:
                items.append((n, os.stat(posixpath.join(path, n))))
            except OSError:
                continue
        return order(items)

    shown = False
    if files:
        show(order(files), None)
        shown = True
    many = len(files) + len(dirs) > 1 or "R" in flags
    queue = [p for p, _ in order(dirs)]
    while queue:
        path = queue.pop(0)
        try:
            items = listing(path)
        except OSError as e:
            err.write("ls: cannot open directory %s: %s\n" % (_q(path), _why(e)))
            status = 2
            continue
        if shown:
            out.write("\n")
        if many:
            out.write("%s:\n" % path)
        show(items, path)
        shown = True
        if "R" in flags:
            queue[0:0] = [posixpath.join(path, n) for n, st in items
                          if _stat.S_ISDIR(st.st_mode) and n not in (".", "..")]
    return status


def _mkdir(shell, args, stdin, out, err):
    flags, valued, paths = _options(args, "pv", with_value="m", long={"parents": "p", "verbose": "v"})
    if not paths:
        raise _Usage("missing operand", hint=True)
    status = 0
    for path in paths:
        try:
            made = _make_parents(path) if "p" in flags else [os.mkdir(path) or path]
            if "v" in flags:
                for one in made:
                    out.write("mkdir: created directory %s\n" % _q(one))
        except OSError as e:
            err.write("mkdir: cannot create directory %s: %s\n" % (_q(path), _why(e)))
            status = 1
    return status


def _make_parents(path):
    """`mkdir -p`: creates what is missing of `path`; returns what it
    created, parents first."""
    made, current = [], "/" if path.startswith("/") else ""
    for part in [p for p in path.split("/") if p]:
        current = posixpath.join(current, part) if current else part
        if not _is_dir(current):
            os.mkdir(current)
            made.append(current)
    return made


def _lstat_dir(path):
    """Whether `path` itself is a directory (a link to one is not)."""
    try:
        return _stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove_tree(path, report):
    """Removes a directory and what it holds, without following links;
    `report(text)` is told of each removal (`rm -v`)."""
    for name in sorted(os.listdir(path)):
        child = posixpath.join(path, name)
        if _lstat_dir(child):
            _remove_tree(child, report)
        else:
            os.remove(child)
            report("removed %s\n" % _q(child))
    os.rmdir(path)
    report("removed directory %s\n" % _q(path))


def _confirm(stdin, err, prompt):
    """`-i`: asks on stderr; yes when the answer read begins with y."""
    err.write(prompt)
    return stdin.readline().strip()[:1] in (b"y", b"Y")


def _rm(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "frRdvi", long={"force": "f", "recursive": "r", "verbose": "v"})
    if not paths and "f" not in flags:
        raise _Usage("missing operand", hint=True)
    recursive = bool(flags & {"r", "R"})
    report = out.write if "v" in flags else (lambda text: None)
    status = 0
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError as e:
            if "f" not in flags:
                err.write("rm: cannot remove %s: %s\n" % (_q(path), _why(e)))
                status = 1
            continue
        is_dir = _stat.S_ISDIR(st.st_mode)
        if recursive and is_dir and posixpath.basename(path.rstrip("/")) in (".", ".."):
            err.write("rm: refusing to remove '.' or '..' directory: skipping %s\n" % _q(path))
            status = 1
            continue
        if recursive and is_dir and os.path.realpath(path) == "/":
            err.write("rm: it is dangerous to operate recursively on '/'\n"
                      "rm: use --no-preserve-root to override this failsafe\n")
            status = 1
            continue
        try:
            if is_dir and recursive:
                if "i" in flags and not _confirm(stdin, err, "rm: descend into directory %s? " % _q(path)):
                    continue
                _remove_tree(path, report)
                continue
            if is_dir and "d" not in flags:
                err.write("rm: cannot remove %s: Is a directory\n" % _q(path))
                status = 1
                continue
            if "i" in flags and not _confirm(stdin, err, "rm: remove %s %s? " % (_file_kind(st), _q(path))):
                continue
            (os.rmdir if is_dir else os.remove)(path)
            report("removed %s%s\n" % ("directory " if is_dir else "", _q(path)))
        except OSError as e:
            err.write("rm: cannot remove %s: %s\n" % (_q(path), _why(e)))
            status = 1
    return status


def _file_kind(st):
    """How `rm -i` names a file: `regular file`, `regular empty file`..."""
    if _stat.S_ISDIR(st.st_mode):
        return "directory"
    if _stat.S_ISLNK(st.st_mode):
        return "symbolic link"
    return "regular empty file" if st.st_size == 0 else "regular file"


def _copy_tree(src, dst):
    """`cp -r`: copies a directory's content into `dst` (made if missing,
    merged into if there)."""
    if not _is_dir(dst):
        os.mkdir(dst)
    for name in sorted(os.listdir(src)):
        s, d = posixpath.join(src, name), posixpath.join(dst, name)
        if _is_dir(s):
            _copy_tree(s, d)
        else:
            _copy_file(s, d)


def _copy_file(src, dst):
    data = _read_file(src)
    with open(dst, "wb") as f:
        f.write(data)


def _inside(path, directory):
    """Whether `path` is `directory` or lies under it."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _targets(name, paths):
    """`cp`/`mv` operands: (sources, target, into a directory?)."""
    if len(paths) < 2:
        raise _Usage("missing destination file operand after %s" % _q(paths[0]) if paths else "missing file operand",
                     hint=True)
    *sources, target = paths
    into = _is_dir(target)
    if len(sources) > 1 and not into:
        raise _Usage("target %s: No such file or directory" % _q(target) if not _exists(target)
                     else "target %s is not a directory" % _q(target))
    return sources, target, into


def _cp(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "rRafpvin", long={"recursive": "r", "force": "f", "no-clobber": "n",
                                                      "interactive": "i", "verbose": "v"})
    sources, target, into = _targets("cp", paths)
    status = 0
    for src in sources:
        dst = posixpath.join(target, posixpath.basename(src.rstrip("/"))) if into else target
        try:
            os.stat(src)
        except OSError as e:
            err.write("cp: cannot stat %s: %s\n" % (_q(src), _why(e)))
            status = 1
            continue
        if _same_file(src, dst):
            err.write("cp: %s and %s are the same file\n" % (_q(src), _q(dst)))
            status = 1
            continue
        if _exists(dst) and not (_is_dir(src) and _is_dir(dst)):
            if "n" in flags or "i" in flags and not _confirm(stdin, err, "cp: overwrite %s? " % _q(dst)):
                continue
        status = max(status, _cp_one(src, dst, flags, out, err))
    return status


def _cp_one(src, dst, flags, out, err):
    """Copies one source; returns 0, or 1 after saying why not."""
    try:
        if _is_dir(src):
            if not flags & set("rRa"):
                err.write("cp: -r not specified; omitting directory %s\n" % _q(src))
                return 1
            if _exists(dst) and not _is_dir(dst):
                err.write("cp: cannot overwrite non-directory %s with directory %s\n" % (_q(dst), _q(src)))
                return 1
            if _inside(dst, src):
                err.write("cp: cannot copy a directory, %s, into itself, %s\n" % (_q(src), _q(dst)))
                return 1
            _copy_tree(src, dst)
        else:
            if dst.endswith("/") and not _is_dir(dst):
                raise NotADirectoryError(20, "Not a directory")
            _copy_file(src, dst)
        if "v" in flags:
            out.write("%s -> %s\n" % (_q(src), _q(dst)))
    except OSError as e:
        err.write("cp: cannot create regular file %s: %s\n" % (_q(dst), _why(e)))
        return 1
    return 0


def _mv(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "fvin", long={"force": "f", "no-clobber": "n", "interactive": "i",
                                                  "verbose": "v"})
    sources, target, into = _targets("mv", paths)
    status = 0
    for src in sources:
        dst = posixpath.join(target, posixpath.basename(src.rstrip("/"))) if into else target
        try:
            os.lstat(src)
            os.stat(src) if src.endswith("/") else None
        except OSError as e:
            err.write("mv: cannot stat %s: %s\n" % (_q(src), _why(e)))
            status = 1
            continue
        if _same_file(src, dst):
            err.write("mv: %s and %s are the same file\n" % (_q(src), _q(dst)))
            status = 1
            continue
        if _exists(dst) and ("n" in flags or "i" in flags and not _confirm(stdin, err, "mv: overwrite %s? " % _q(dst))):
            continue
        if _is_dir(src) and _exists(dst) and not _is_dir(dst):
            err.write("mv: cannot overwrite non-directory %s with directory %s\n" % (_q(dst), _q(src)))
            status = 1
            continue
        if _is_dir(src) and _inside(dst, src):
            err.write("mv: cannot move %s to a subdirectory of itself, %s\n" % (_q(src), _q(dst)))
            status = 1
            continue
        try:
            os.rename(src, dst)
            if "v" in flags:
                out.write("renamed %s -> %s\n" % (_q(src), _q(dst)))
        except OSError as e:
            err.write("mv: cannot move %s to %s: %s\n" % (_q(src), _q(dst), _why(e)))
            status = 1
    return status


def _count_option(args, name):
    """`head`/`tail` options: (lines or None, bytes or None, sign, quiet,
    operands); `-5` is `-n 5`; sign `+` for `-n +N` (from line N on), `-`
    for `-n -N` (for head: all but the last N)."""
    lines, count_bytes, sign, quiet, rest = None, None, "", False, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i + 1:])
            break
        m = re.fullmatch(r"-([0-9]+)", arg)
        if m:
            lines = int(m.group(1))
        elif arg in ("-n", "-c") or re.fullmatch(r"-[nc].+", arg) or arg.startswith("--lines=") or arg.startswith("--bytes="):
            if arg.startswith("--"):
                key, value = arg[2:].split("=", 1)
                key = "n" if key == "lines" else "c"
            elif len(arg) > 2:
                key, value = arg[1], arg[2:]
            else:
                i += 1
                if i >= len(args):
                    raise _Usage("option requires an argument -- '%s'" % arg[1])
                key, value = arg[1], args[i]
            try:
                number = int(value.lstrip("+-"))
            except ValueError:
                what = "lines" if key == "n" else "bytes"
                raise _Usage("invalid number of %s: '%s'" % (what, value))
            if key == "n":
                lines, count_bytes = number, None
            else:
                count_bytes, lines = number, None
            sign = value[:1] if value[:1] in "+-" else ""
        elif arg in ("-q", "--quiet", "--silent"):
            quiet = True
        elif arg.startswith("-") and len(arg) > 1:
            raise _Usage("invalid option -- '%s'" % arg[1:])
        else:
            rest.append(arg)
        i += 1
    return lines, count_bytes, sign, quiet, rest


def _head_or_tail(name, shell, args, stdin, out, err):
    lines, count_bytes, sign, quiet, paths = _count_option(args, name)
    from_start = sign == "+" and name == "tail"
    all_but = sign == "-" and name == "head"
    if lines is None and count_bytes is None:
        lines = 10
    status = 0
    paths = paths or ["-"]
    first = True
    for path in paths:
        try:
            data = stdin.read() if path == "-" else _read_file(path)
        except IsADirectoryError as e:  # opened, then failed to read
            if len(paths) > 1 and not quiet:
                out.write("%s==> %s <==\n" % ("" if first else "\n", path))
            first = False
            err.write("%s: error reading %s: %s\n" % (name, _q(path), _why(e)))
            status = 1
            continue
        except OSError as e:
            err.write("%s: cannot open %s for reading: %s\n" % (name, _q(path), _why(e)))
            status = 1
            continue
        if len(paths) > 1 and not quiet:
            out.write("%s==> %s <==\n" % ("" if first else "\n", "standard input" if path == "-" else path))
        first = False
        if count_bytes is not None:
            if all_but:
                chunk = data[:max(len(data) - count_bytes, 0)]
            elif name == "head":
                chunk = data[:count_bytes]
            elif from_start:
                chunk = data[max(count_bytes - 1, 0):]
            else:
                chunk = data[len(data) - count_bytes:] if count_bytes else b""
        else:
            parts = data.split(b"\n")
            ends_with_newline = data.endswith(b"\n")
            if ends_with_newline:
                parts.pop()
            with_newlines = [p + b"\n" for p in parts]
            if with_newlines and not ends_with_newline:
                with_newlines[-1] = with_newlines[-1][:-1]
            if all_but:
                chosen = with_newlines[:max(len(with_newlines) - lines, 0)]
            elif name == "head":
                chosen = with_newlines[:lines]
            elif from_start:
                chosen = with_newlines[max(lines - 1, 0):]
            else:
                chosen = with_newlines[len(with_newlines) - lines:] if lines else []
            chunk = b"".join(chosen)
        out.write(chunk)
    return status


def _head(shell, args, stdin, out, err):
    return _head_or_tail("head", shell, args, stdin, out, err)


def _tail(shell, args, stdin, out, err):
    return _head_or_tail("tail", shell, args, stdin, out, err)


def _wc(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "lwcmL", long={"lines": "l", "words": "w", "bytes": "c", "chars": "m"})
    chosen = [f for f in "lwmcL" if f in flags] or ["l", "w", "c"]
    status = 0
    rows = []
    for path in paths or ["-"]:
        try:
            if path != "-" and _is_dir(path):
                err.write("wc: %s: Is a directory\n" % _qf(path))
                rows.append(([0] * len(chosen), path))
                status = 1
                continue
            data = stdin.read() if path == "-" else _read_file(path)
        except OSError as e:
            err.write("wc: %s: %s\n" % (_qf(path), _why(e)))
            status = 1
            continue
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data),
                  "m": len(data), "L": _longest_line(data)}  # C locale: a character is a byte
        rows.append(([counts[f] for f in chosen], None if path == "-" and not paths else path))
    if len(rows) > 1:
        rows.append(([(max if f == "L" else sum)(r[0][i] for r in rows) for i, f in enumerate(chosen)], "total"))
    if not rows:
        return status
    only_stdin = not paths
    if len(chosen) == 1 and len(rows) == 1:
        width = 1
    elif only_stdin:
        width = 7
    else:
        total_bytes = 0
        for path in paths:
            try:
                st = os.stat(path)
                if _stat.S_ISREG(st.st_mode):
                    total_bytes += st.st_size
            except OSError:
                pass
        width = max(len(str(total_bytes)), 1)
        if not all(p != "-" and _is_regular(p) for p in paths):
            width = max(width, 7)
    for counts, path in rows:
        line = " ".join("%*d" % (width, c) for c in counts)
        out.write(line + (" " + path if path is not None else "") + "\n")
    return status


def _longest_line(data):
    """`wc -L`: the widest line, tabs to the next multiple of 8."""
    return max((len(line.expandtabs(8)) for line in data.decode("utf-8", "replace").split("\n")), default=0)


def _pwd(shell, args, stdin, out, err):
    out.write(os.getcwd() + "\n")
    return 0


def _cd(shell, args, stdin, out, err):
    if len(args) > 1:
        err.write("bash: cd: too many arguments\n")
        return 1
    target = args[0] if args else shell.vars.get("HOME", "/mnt/data")
    back = target == "-"
    if back:
        if "OLDPWD" not in shell.vars:
            err.write("bash: cd: OLDPWD not set\n")
            return 1
        target = shell.vars["OLDPWD"]
    try:
        old = os.getcwd()
        os.chdir(target)
        shell.vars["OLDPWD"] = old
        shell.vars["PWD"] = os.getcwd()
    except OSError as e:
        err.write("bash: cd: %s: %s\n" % (target, _why(e)))
        return 1
    if back:  # `cd -` shows where it went
        out.write(os.getcwd() + "\n")
    return 0


def _touch(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "acm")
    if not paths:
        raise _Usage("missing file operand", hint=True)
    status = 0
    for path in paths:
        try:
            if _exists(path):
                os.utime(path)
            elif "c" not in flags:
                with open(path, "ab"):
                    pass
        except OSError as e:
            err.write("touch: cannot touch %s: %s\n" % (_q(path), _why(e)))
            status = 1
    return status


def _base64(shell, args, stdin, out, err):
    flags, valued, paths = _options(args, "di", with_value="w", long={"decode": "d"})
    try:
        data = _read_file(paths[0]) if paths and paths[0] != "-" else stdin.read()
    except OSError as e:
        err.write("base64: %s: %s\n" % (_qf(paths[0]), _why(e)))
        return 1
    if "d" in flags:
        decoded, ok = _base64_decode(data, "i" in flags)
        out.write(decoded)
        if not ok:
            err.write("base64: invalid input\n")
            return 1
        return 0
    text = base64.b64encode(data).decode("ascii")
    if not valued.get("w", "76").isdigit():
        err.write("base64: invalid wrap size: %s\n" % _q(valued["w"]))
        return 1
    wrap = int(valued.get("w", "76"))
    if wrap > 0:
        text = "\n".join(text[i:i + wrap] for i in range(0, len(text), wrap))
    out.write(text + ("\n" if text and wrap > 0 else ""))
    return 0


_BASE64_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _base64_decode(data, ignore_garbage):
    """GNU `base64 -d`: (bytes, ok). Newlines are skipped (anything outside
    the alphabet with `-i`); at the first bad or short group it stops, with
    what that group's leading characters make, and fails."""
    data = data.replace(b"\n", b"")
    if ignore_garbage:
        data = bytes(c for c in data if c in _BASE64_ALPHABET or c == 0x3D)
    out = bytearray()
    for i in range(0, len(data), 4):
        group = data[i:i + 4]
        if len(group) == 4 and re.fullmatch(rb"[A-Za-z0-9+/]{2}(?:[A-Za-z0-9+/]{2}|[A-Za-z0-9+/]=|==)", group):
            out += base64.b64decode(group)
            continue
        good = len(re.match(rb"[A-Za-z0-9+/]*", group).group(0))
        if good >= 2:
            out += base64.b64decode(group[:good] + b"=" * (4 - good))
        return bytes(out), False
    return bytes(out), True


def _exit(shell, args, stdin, out, err):
    status = shell.status if not args else None
    if args:
        try:
            status = int(args[0]) & 0xFF
        except ValueError:
            err.write("bash: exit: %s: numeric argument required\n" % args[0])
            status = 2
        else:
            if len(args) > 1:
                err.write("bash: exit: too many arguments\n")
                status = 1
    raise _ExitShell(status)


def _set(shell, args, stdin, out, err):
    """`set [-eu] [+eu] [-o errexit|nounset|pipefail] [--] [ARG]...`:
    options (others are accepted and ignored), then the positional
    arguments."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            shell.args = args[i + 1:]
            return 0
        if arg[:1] not in ("-", "+") or len(arg) < 2:
            shell.args = args[i:]
            return 0
        on = arg[0] == "-"
        for c in arg[1:]:
            if c == "o":
                i += 1
                name = args[i] if i < len(args) else ""
                c = {"errexit": "e", "nounset": "u", "pipefail": "pipefail"}.get(name, "")
            if c == "e":
                shell.errexit = on
            elif c == "u":
                shell.nounset = on
            elif c == "pipefail":
                shell.pipefail = on
        i += 1
    return 0


def _break(shell, args, stdin, out, err, kind="break"):
    """`break [N]`, `continue [N]`: leave (or go on with) the N-th
    enclosing loop."""
    if not shell.loops:
        err.write("bash: %s: only meaningful in a `for', `while', or `until' loop\n" % kind)
        return 0
    levels = 1
    if args:
        if not args[0].isdigit() or int(args[0]) < 1:
            err.write("bash: %s: %s: loop count out of range\n" % (kind, args[0]))
            return 1
        levels = min(int(args[0]), shell.loops)
    raise _LoopControl(kind, levels)


def _export(shell, args, stdin, out, err):
    for arg in args:
        if arg.startswith("-"):
            continue
        name, sep, value = arg.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            err.write("bash: export: `%s': not a valid identifier\n" % arg)
            return 1
        if sep:
            shell.vars[name] = value
        shell.exported.add(name)
    return 0


def _unset(shell, args, stdin, out, err):
    for name in args:
        shell.vars.pop(name, None)
        shell.exported.discard(name)
    return 0


def _read(shell, args, stdin, out, err):
    """`read [-r] [-p PROMPT] [NAME]...`: one line of the input into the
    names, split on `$IFS`, the last name taking the rest (`REPLY` when
    none). Status 1 at the end of the input, even when an unterminated
    last line was read (which is why `while read` skips it)."""
    raw, i = False, 0
    while i < len(args) and args[i].startswith("-") and len(args[i]) > 1:
        for j, c in enumerate(args[i][1:], 1):
            if c == "r":
                raw = True
            elif c == "p":
                i += len(args[i]) == j + 1  # the prompt shows on a terminal only
                break
            elif c not in "se":
                err.write("bash: read: -%s: invalid option\nread: usage: read [-ers] [-a array] [-d delim] "
                          "[-i text] [-n nchars] [-N nchars] [-p prompt] [-t timeout] [-u fd] [name ...]\n" % c)
                return 2
        i += 1
    names = args[i:] or ["REPLY"]
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            err.write("bash: read: `%s': not a valid identifier\n" % name)
            return 1
    chars, complete = _read_line(stdin, raw)
    ifs = shell.vars.get("IFS", " \t\n")
    if names == ["REPLY"]:
        values = ["".join(c for c, _ in chars)]  # REPLY keeps the line whole
    else:
        values = _ifs_split(chars, ifs, len(names))
    for name, value in zip(names, values):
        shell.vars[name] = value
    return 0 if complete else 1


def _read_line(stdin, raw):
    """The next line for `read`: [(char, escaped)], and whether it ended
    with a newline. Without `-r` a backslash quotes the next character and
    a backslash-newline joins the next line."""
    chars = []
    while True:
        line = stdin.readline()
        complete = line.endswith(b"\n")
        text = line.decode("utf-8", "surrogateescape")[:-1 if complete else None]
        i = 0
        while i < len(text):
            if text[i] == "\\" and not raw:
                if i + 1 < len(text):
                    chars.append((text[i + 1], True))
                    i += 2
                    continue
                if complete:
                    break  # a line continuation
                i += 1
                continue
            chars.append((text[i], False))
            i += 1
        else:
            return chars, complete
        # backslash-newline: the line goes on


def _ifs_split(chars, ifs, count):
    """`read`'s fields: `chars` ([(char, escaped)]) split on the `ifs`
    characters not escaped, into at most `count` fields."""
    blanks = set(c for c in ifs if c in " \t\n")
    split = lambda k: not chars[k][1] and chars[k][0] in ifs
    blank = lambda k: not chars[k][1] and chars[k][0] in blanks
    start, end = 0, len(chars)
    while start < end and blank(start):
        start += 1
    while end > start and blank(end - 1):
        end -= 1
    fields, pos = [], start
    while len(fields) < count - 1 and pos < end:
        first = pos
        while pos < end and not split(pos):
            pos += 1
        fields.append("".join(c for c, _ in chars[first:pos]))
        while pos < end and blank(pos):
            pos += 1
        if pos < end and split(pos):
            pos += 1
            while pos < end and blank(pos):
                pos += 1
    if pos < end or len(fields) < count:
        fields.append("".join(c for c, _ in chars[pos:end]))
    return fields + [""] * (count - len(fields))


def _test(shell, args, stdin, out, err, bracket=False):
    if bracket:
        if not args or args[-1] != "]":
            err.write("bash: [: missing `]'\n")
            return 2
        args = args[:-1]
    try:
        return 0 if _evaluate(args) else 1
    except _Usage as e:
        err.write("bash: %s: %s\n" % ("[" if bracket else "test", e))
        return 2


def _evaluate(args):
    """`test`'s expression, by bash's rules: up to four arguments by
    their count (POSIX), more by precedence (`!`, `( )`, `-a`, `-o`)."""
    n = len(args)
    if n == 0:
        return False
    if n == 1:
        return args[0] != ""
    if n == 2:
        if args[0] == "!":
            return args[1] == ""
        if args[0] in _UNARY_TESTS:
            return _unary_test(args[0], args[1])
        raise _Usage("%s: unary operator expected" % args[0])
    if n == 3:
        if args[1] in _BINARY_TESTS:
            return _binary_test(*args)
        if args[0] == "!":
            return not _evaluate(args[1:])
        if args[0] == "(" and args[2] == ")":
            return args[1] != ""
        if args[1] in ("-a", "-o"):
            return (args[0] != "" and args[2] != "") if args[1] == "-a" else (args[0] != "" or args[2] != "")
        raise _Usage("%s: binary operator expected" % args[1])
    if n == 4 and args[0] == "!":
        return not _evaluate(args[1:])
    if n == 4 and args[0] == "(" and args[3] == ")":
        return _evaluate(args[1:3])
    parser = _TestParser(args)
    value = parser.disjunction()
    if parser.pos < n:
        raise _Usage("too many arguments")
    return value


class _TestParser:
    """`test` with more than four arguments: `-o` binds looser than `-a`,
    then `!`, `( ... )`, unary and binary primaries."""

    def __init__(self, args):
        self.args, self.pos = args, 0

    def peek(self, ahead=0):
        k = self.pos + ahead
        return self.args[k] if k < len(self.args) else None

    def disjunction(self):
        value = self.conjunction()
        while self.peek() == "-o":
            self.pos += 1
            value = self.conjunction() or value
        return value

    def conjunction(self):
        value = self.term()
        while self.peek() == "-a":
            self.pos += 1
            value = self.term() and value
        return value

    def term(self):
        arg = self.peek()
        if arg is None:
            raise _Usage("argument expected")
        if arg == "!":
            self.pos += 1
            return not self.term()
        if arg == "(":
            self.pos += 1
            value = self.disjunction()
            if self.peek() != ")":
                raise _Usage("`)' expected")
            self.pos += 1
            return value
        if self.peek(1) in _BINARY_TESTS and self.peek(2) is not None:
            self.pos += 3
            return _binary_test(arg, self.args[self.pos - 2], self.args[self.pos - 1])
        if arg in _UNARY_TESTS and self.peek(1) is not None:
            self.pos += 2
            return _unary_test(arg, self.args[self.pos - 1])
        self.pos += 1
        return arg != ""


def _stat_or_none(path, follow=True):
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None


def _access(path, mode):
    try:
        return os.access(path, mode)
    except (OSError, NotImplementedError):
        return _exists(path)


_UNARY_TESTS = {
    "-e": _exists, "-a": _exists,
    "-f": lambda p: bool(_stat_or_none(p)) and _stat.S_ISREG(_stat_or_none(p).st_mode),
    "-d": _is_dir,
    "-s": lambda p: bool(_stat_or_none(p)) and _stat_or_none(p).st_size > 0,
    "-L": lambda p: bool(_stat_or_none(p, False)) and _stat.S_ISLNK(_stat_or_none(p, False).st_mode),
    "-h": lambda p: bool(_stat_or_none(p, False)) and _stat.S_ISLNK(_stat_or_none(p, False).st_mode),
    "-r": lambda p: _access(p, os.R_OK), "-w": lambda p: _access(p, os.W_OK),
    "-x": lambda p: _access(p, os.X_OK),
    "-z": lambda v: v == "", "-n": lambda v: v != "",
}


def _unary_test(op, value):
    return _UNARY_TESTS[op](value)


def _test_integer(text):
    try:
        return int(text.strip())
    except ValueError:
        raise _Usage("%s: integer expression expected" % text)


def _mtime(path):
    st = _stat_or_none(path)
    return st.st_mtime_ns if st else None


_BINARY_TESTS = {
    "=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a.encode("utf-8", "surrogateescape") < b.encode("utf-8", "surrogateescape"),
    ">": lambda a, b: a.encode("utf-8", "surrogateescape") > b.encode("utf-8", "surrogateescape"),
    "-eq": lambda a, b: _test_integer(a) == _test_integer(b), "-ne": lambda a, b: _test_integer(a) != _test_integer(b),
    "-lt": lambda a, b: _test_integer(a) < _test_integer(b), "-le": lambda a, b: _test_integer(a) <= _test_integer(b),
    "-gt": lambda a, b: _test_integer(a) > _test_integer(b), "-ge": lambda a, b: _test_integer(a) >= _test_integer(b),
    "-nt": lambda a, b: _mtime(a) is not None and (_mtime(b) is None or _mtime(a) > _mtime(b)),
    "-ot": lambda a, b: _mtime(b) is not None and (_mtime(a) is None or _mtime(a) < _mtime(b)),
    "-ef": lambda a, b: _same_file(a, b),
}


def _binary_test(left, op, right):
    return _BINARY_TESTS[op](left, right)


_GREP_LONG = {"ignore-case": "i", "count": "c", "line-number": "n", "recursive": "r", "invert-match": "v",
              "files-with-matches": "l", "quiet": "q", "extended-regexp": "E", "fixed-strings": "F",
              "word-regexp": "w", "only-matching": "o", "no-filename": "h", "with-filename": "H",
              "include=": "include", "exclude=": "exclude", "exclude-dir=": "exclude-dir"}


def _grep(shell, args, stdin, out, err):
    """`grep [-ivcnlLqHhEFwoxrRsm] [-e PATTERN]... [-A/-B/-C N]
    [--include=GLOB] [--exclude=GLOB] PATTERN [FILE]...`: GNU grep's
    output and statuses (0 a line selected, 1 none, 2 an error)."""
    flags, valued, rest = _options(args, "ivcnlLqHhEFwoxrRsa", with_value="eABCm", long=_GREP_LONG,
                                   repeat=("e", "include", "exclude", "exclude-dir"))
    patterns = valued.get("e")
    if patterns is None:
        if not rest:
            err.write("Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.\n")
            return 2
        patterns, rest = [rest[0]], rest[1:]
    compiled = _grep_regex(patterns, flags)
    if isinstance(compiled, str):
        err.write("grep: %s\n" % compiled)
        return 2
    context = _grep_context(valued)
    limit = int(valued["m"]) if "m" in valued else None
    recursive = bool(flags & {"r", "R"})
    paths = _grep_paths(rest, valued) if recursive else rest or ["-"]
    several = len(rest) > 1 or recursive and (not rest or any(_is_dir(p) for p in rest))
    show_names = ("H" in flags or several) and "h" not in flags
    found_any, status = False, 0
    for path in paths:
        if path != "-" and _is_dir(path):
            err.write("grep: %s: Is a directory\n" % path)
            status = 2
            continue
        try:
            data = stdin.read() if path == "-" else _read_file(path)
        except OSError as e:
            if "s" not in flags:
                err.write("grep: %s: %s\n" % (path, _why(e)))
            status = 2
            continue
        label = "(standard input)" if path == "-" else path
        matched = _grep_file(data, compiled, flags, context, limit, label if show_names else None, label, out, err)
        found_any = found_any or matched > 0
        if "q" in flags and found_any:
            return 0
        if "c" in flags:
            out.write((label + ":" if show_names else "") + "%d\n" % matched)
        if "l" in flags and matched:
            out.write(label + "\n")
        if "L" in flags and not matched:
            out.write(label + "\n")
    return status or (0 if found_any else 1)


def _grep_regex(patterns, flags):
    """The compiled (bytes) regex of grep's patterns, or grep's complaint
    (a string) if one is invalid."""
    regexes = []
    for pattern in patterns:
        for one in pattern.split("\n"):
            if "F" in flags:
                regex = re.escape(one)
            else:
                regex = _posix_classes(one if "E" in flags else _basic_regex(one))
                regex = regex.replace(r"\<", r"\b(?=\w)").replace(r"\>", r"\b(?<=\w)")
            if "w" in flags:
                regex = r"(?<!\w)(?:%s)(?!\w)" % regex
            if "x" in flags:
                regex = r"\A(?:%s)\Z" % regex
            regexes.append(regex)
    try:
        return re.compile("|".join("(?:%s)" % r for r in regexes).encode("utf-8", "surrogateescape"),
                          re.IGNORECASE if "i" in flags else 0)
    except re.error as e:
        return _regex_complaint(str(e))


def _regex_complaint(python_message):
    """GNU grep's words for what Python's `re` refused."""
    if "missing )" in python_message:
        return "Unmatched ( or \\("
    if "unbalanced parenthesis" in python_message:
        return "Unmatched ) or \\)"
    if "end of pattern" in python_message:
        return "Trailing backslash"
    return "Invalid regular expression"


_POSIX_CLASSES = {"digit": "0-9", "alpha": "A-Za-z", "alnum": "0-9A-Za-z", "upper": "A-Z", "lower": "a-z",
                  "space": r" \t\n\r\f\v", "blank": r" \t", "punct": r"!-/:-@\[-`{-~", "xdigit": "0-9A-Fa-f",
                  "word": r"\w", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": r"!-~"}


def _posix_classes(regex):
    """`[[:digit:]]` and the other POSIX classes, as Python's ranges."""
    return re.sub(r"\[:([a-z]+):\]", lambda m: _POSIX_CLASSES.get(m.group(1), m.group(0)), regex)


def _grep_context(valued):
    """(lines before, lines after) of `-B`, `-A`, `-C`."""
    both = int(valued.get("C", 0))
    return int(valued.get("B", both)), int(valued.get("A", both))


def _grep_paths(operands, valued):
    """The files `grep -r` reads: each operand, directories walked in name
    order, filtered by `--include`, `--exclude`, `--exclude-dir`."""
    include, exclude = valued.get("include"), valued.get("exclude", [])
    skip_dirs = valued.get("exclude-dir", [])

    def wanted(name):
        return (include is None or any(fnmatch.fnmatchcase(name, g) for g in include)) and \
            not any(fnmatch.fnmatchcase(name, g) for g in exclude)

    found = []
    for path in operands or ["."]:
        if not _is_dir(path):
            found.append(path)
            continue
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatchcase(d, g) for g in skip_dirs))
            found.extend(posixpath.join(root, n) for n in sorted(names) if wanted(n))
    if not operands:  # `grep -r PATTERN` names what it finds without `./`
        found = [p[2:] if p.startswith("./") else p for p in found]
    return found


def _grep_file(data, compiled, flags, context, limit, name, label, out, err):
    """Greps one file's bytes; writes its lines (with `--` between
    context groups) unless `-c`, `-l`, `-L` or `-q`; returns how many
    lines were selected."""
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    quiet = bool(flags & {"q", "l", "L", "c"})
    binary = b"\0" in data and "a" not in flags
    before, after = context if not flags & {"o"} else (0, 0)
    prefix = (name or "").encode("utf-8", "surrogateescape")
    matched, last_shown, pending_after = 0, 0, 0
    for number, line in enumerate(lines, 1):
        if limit is not None and matched >= limit:  # `-m N`: then only the trailing context
            if not (pending_after and not quiet and not binary):
                break
            out.write(_grep_line(prefix, number, line, b"-", flags))
            last_shown, pending_after = number, pending_after - 1
            continue
        hit = (compiled.search(line) is not None) != ("v" in flags)
        if not hit:
            if pending_after and not quiet and not binary:
                out.write(_grep_line(prefix, number, line, b"-", flags))
                last_shown, pending_after = number, pending_after - 1
            continue
        matched += 1
        if quiet:
            continue
        if binary:
            err.write("grep: %s: binary file matches\n" % label)
            return matched
        first = max(number - before, last_shown + 1, 1)
        if (before or after) and last_shown and first > last_shown + 1:
            out.write(b"--\n")
        for k in range(first, number):
            out.write(_grep_line(prefix, k, lines[k - 1], b"-", flags))
        if "o" in flags and "v" not in flags:
            for m in compiled.finditer(line):
                if m.group(0):
                    out.write(_grep_line(prefix, number, m.group(0), b":", flags))
        else:
            out.write(_grep_line(prefix, number, line, b":", flags))
        last_shown, pending_after = number, after
    return matched


def _grep_line(prefix, number, text, separator, flags):
    """One output line: `name:`, `number:` (`-` for context lines)."""
    head = (prefix + separator if prefix else b"") + (b"%d" % number + separator if "n" in flags else b"")
    return head + text + b"\n"


def _basic_regex(pattern):
    """A POSIX basic regular expression as Python's: `\\(`, `\\)`, `\\{`,
    `\\}`, `\\|`, `\\+`, `\\?` are the operators, their bare forms literal;
    a `*` that starts the expression (or a group) is literal too."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            out.append(n if n in "(){}|+?" else "\\" + n)
            i += 2
            continue
        if c == "*" and (not out or out == ["^"] or out[-1] in ("(", "|")):
            out.append("\\*")
        else:
            out.append("\\" + c if c in "(){}|+?" else c)
        i += 1
    return "".join(out)


def _sort(shell, args, stdin, out, err):
    """`sort [-rnufbs] [-t SEP] [-k F1[.C1][,F2[.C2]][OPTS]]... [FILE]...`:
    GNU sort in the C locale: keys in turn, then the whole line (bytes)
    unless `-s` or `-u`; `-u` keeps the first line of each equal key."""
    flags, valued, paths = _options(args, "rnufbs", with_value="kt",
                                    long={"reverse": "r", "numeric-sort": "n", "unique": "u",
                                          "ignore-case": "f", "stable": "s"}, repeat=("k",))
    separator = valued.get("t")
    if separator is not None and len(separator) != 1:
        raise _Usage("multi-character tab '%s'" % separator)
    keys = [_sort_key_spec(k, flags) for k in valued.get("k", [])] or [(None, None, set(flags) & set("nrfb"))]
    data = b""
    for path in paths or ["-"]:
        try:
            data += stdin.read() if path == "-" else _read_file(path)
        except OSError as e:
            err.write("sort: cannot read: %s: %s\n" % (_qf(path), _why(e)))
            return 2
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    sep = separator.encode("utf-8", "surrogateescape") if separator is not None else None

    def by_keys(a, b):
        for start, end, opts in keys:
            c = _sort_compare(_sort_field(a, start, end, sep, opts), _sort_field(b, start, end, sep, opts), opts)
            if c:
                return -c if "r" in opts else c
        return 0

    def by_line(a, b):
        c = by_keys(a, b)
        if c or flags & {"s", "u"}:
            return c
        c = (a > b) - (a < b)
        return -c if "r" in flags else c

    import functools
    lines.sort(key=functools.cmp_to_key(by_line))
    if "u" in flags:
        lines = [line for k, line in enumerate(lines) if k == 0 or by_keys(lines[k - 1], line)]
    out.write(b"".join(line + b"\n" for line in lines))
    return 0


def _sort_key_spec(text, flags):
    """`-k F1[.C1][OPTS][,F2[.C2][OPTS]]`: ((F1, C1), (F2, C2) or None,
    options); a key with no options of its own takes the global ones."""
    m = re.fullmatch(r"([0-9]+)(?:\.([0-9]+))?([bdfgiMhnRrV]*)(?:,([0-9]+)(?:\.([0-9]+))?([bdfgiMhnRrV]*))?", text)
    if not m or int(m.group(1)) == 0:
        raise _Usage("invalid number at field start: invalid count at start of '%s'" % text)
    opts = set(m.group(3) + (m.group(6) or ""))
    start = (int(m.group(1)), int(m.group(2) or 1))
    end = (int(m.group(4)), int(m.group(5) or 0)) if m.group(4) else None
    return start, end, opts or set(flags) & set("nrfb")


def _sort_fields(line, sep):
    """(start, end) of each field: split on `sep`, else runs of non-blanks
    with the blanks before them."""
    if sep is None:
        return [m.span() for m in re.finditer(rb"[ \t]*[^ \t]+", line)]
    spans, pos = [], 0
    while True:
        end = line.find(sep, pos)
        spans.append((pos, len(line) if end < 0 else end))
        if end < 0:
            return spans
        pos = end + 1


def _sort_field(line, start, end, sep, opts):
    """The part of `line` a key covers (the whole line without `-k`)."""
    if start is None:
        return line.lstrip(b" \t") if "b" in opts else line
    spans = _sort_fields(line, sep)

    def position(field, char, at_end):
        if field > len(spans):
            return len(line)
        first, last = spans[field - 1]
        if "b" in opts:
            while first < last and line[first:first + 1] in (b" ", b"\t"):
                first += 1
        if at_end and char == 0:
            return last
        return min(first + char - (0 if at_end else 1), last)

    begin = position(start[0], start[1], False)
    finish = len(line) if end is None else position(end[0], end[1], True)
    return line[begin:max(begin, finish)]


def _sort_compare(a, b, opts):
    if "n" in opts:
        a, b = _sort_number(a), _sort_number(b)
    elif "f" in opts:
        a, b = a.upper(), b.upper()
    return (a > b) - (a < b)


def _sort_number(text):
    """`sort -n`'s value: a leading number after blanks, else 0."""
    m = re.match(rb"[ \t]*(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+))", text)
    return float(m.group(1)) if m else 0.0


def _uniq(shell, args, stdin, out, err):
    flags, _, paths = _options(args, "cdui", long={"count": "c", "repeated": "d", "unique": "u",
                                                  "ignore-case": "i"})
    try:
        data = _read_file(paths[0]) if paths and paths[0] != "-" else stdin.read()
    except OSError as e:
        err.write("uniq: %s: %s\n" % (_qf(paths[0]), _why(e)))
        return 1
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    same = (lambda a, b: a.lower() == b.lower()) if "i" in flags else (lambda a, b: a == b)
    groups = []
    for line in lines:
        if groups and same(groups[-1][0], line):
            groups[-1][1] += 1
        else:
            groups.append([line, 1])
    for line, count in groups:
        if "d" in flags and count < 2 or "u" in flags and count > 1:
            continue
        out.write((b"%7d " % count if "c" in flags else b"") + line + b"\n")
    return 0


def _sleep(shell, args, stdin, out, err):
    total = 0.0
    for arg in args:
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)([smhd]?)", arg)
        if not m:
            err.write("sleep: invalid time interval %s\nTry 'sleep --help' for more information.\n" % _q(arg))
            return 1
        total += float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    time.sleep(total)
    return 0


def _date(shell, args, stdin, out, err):
    fmt = None
    utc = False
    for arg in args:
        if arg.startswith("+"):
            fmt = arg[1:]
        elif arg in ("-u", "--utc"):
            utc = True
    now = time.gmtime()
    out.write(time.strftime(fmt if fmt is not None else "%a %b %e %H:%M:%S UTC %Y", now) + "\n")
    return 0


def _which(shell, args, stdin, out, err):
    status = 0
    for name in args:
        if name.startswith("-"):
            continue
        if name in COMMANDS and name not in _SHELL_BUILTINS:
            out.write("/usr/bin/%s\n" % name)
        else:
            status = 1
    return status


def _command(shell, args, stdin, out, err):
    if args[:1] == ["-v"]:
        status = 0
        for name in args[1:]:
            if name in _SHELL_BUILTINS:
                out.write(name + "\n")
            elif name in COMMANDS:
                out.write("/usr/bin/%s\n" % name)
            else:
                status = 1
        return status
    if not args:
        return 0
    return shell.call(args, stdin, out, err)


def _env(shell, args, stdin, out, err):
    if args:
        return shell.call(args, stdin, out, err)
    for name in sorted(shell.vars):
        out.write("%s=%s\n" % (name, shell.vars[name]))
    return 0


def _python(shell, args, stdin, out, err):
    """`python3 [options] (-c CODE | - | FILE) [ARG]...`: the code runs on
    this interpreter, in a fresh `__main__`, with this command's streams,
    the shell's exported variables in `os.environ`, and the script's
    directory (the current one for `-c` and `-`) first on `sys.path`."""
    name = "python3"
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-", "-c", "-m"):
        flag = args[i]
        if flag in ("-V", "--version"):
            out.write("Python %d.%d.%d\n" % tuple(PYTHON_VERSION))
            return 0
        if flag not in ("-u", "-B", "-I", "-E", "-s", "-S", "-q", "-O", "-OO", "-b"):
            err.write("Unknown option: %s\n%s" % (flag, _PYTHON_USAGE))
            return 2
        i += 1
    rest = args[i:]
    directory = os.getcwd()
    if not rest or rest[0] == "-":
        source, filename, argv = stdin.read().decode("utf-8", "replace"), "<stdin>", ["-"] + rest[1:] if rest else [""]
    elif rest[0] == "-c":
        if len(rest) < 2:
            err.write("Argument expected for the -c option\n" + _PYTHON_USAGE)
            return 2
        source, filename, argv = rest[1], "<string>", ["-c"] + rest[2:]
    elif rest[0] == "-m":
        err.write("%s: running modules (-m) is not supported in baton's sandbox\n" % name)
        return 1
    else:
        filename = posixpath.normpath(posixpath.join(os.getcwd(), rest[0]))
        try:
            source = _read_file(rest[0]).decode("utf-8", "replace")
        except OSError as e:
            err.write("%s: can't open file %s: [Errno %d] %s\n" % (name, _python_repr(filename), e.errno or 2, _why(e)))
            return 2
        directory, argv = posixpath.dirname(filename), rest[:]
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    path0 = directory if filename not in ("<stdin>", "<string>") else ""  # '' is the current directory
    return _run_python(source, filename, argv, stdin, out, err, shell.environment(), directory, path0)


_PYTHON_USAGE = ("usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
                 "Try `python -h' for more information.\n")


def _python_repr(text):
    """How CPython's `%R` shows a path in its own messages."""
    return repr(text)


def _run_python(source, filename, argv, stdin, out, err, environ=None, directory=None, path0=None):
    saved = (sys.stdout, sys.stderr, sys.stdin, list(sys.argv), os.getcwd(), list(sys.path), set(sys.modules))
    saved_environ = _environ_swap(environ) if environ is not None else None
    # `<stdin>` and `<string>` have no lines to show in a traceback (as in
    # CPython), whatever the host registered under those names.
    hidden = linecache.cache.pop(filename, None) if filename in ("<stdin>", "<string>") else None
    text_out = sys.stdout = _TextSink(out, "<stdout>", buffered=True)
    sys.stderr = _TextSink(err, "<stderr>")
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_RawInput(stdin if isinstance(stdin, _Input) else _Input(stdin))),
                                 encoding="utf-8")
    sys.argv = argv
    if directory is not None:
        sys.path.insert(0, directory if path0 is None else path0)
    status = 0
    try:
        try:
            code = (compile_source or _plain_compile)(source, filename)
            namespace = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
            if filename not in ("<stdin>", "<string>"):
                namespace["__file__"] = filename
            exec(code, namespace)
        except SystemExit as e:
            status = _exit_status(e, err)
        except BaseException as e:
            if _is_control(e):
                raise
            _python_traceback(e, filename, err, directory)
            status = 1
    finally:
        for stream in (sys.stdout, sys.stderr, text_out):
            try:
                stream.flush()
            except Exception:
                pass
        if hidden is not None:
            linecache.cache[filename] = hidden
        sys.stdout, sys.stderr, sys.stdin = saved[0], saved[1], saved[2]
        sys.argv[:] = saved[3]
        sys.path[:] = saved[5]
        _forget_modules(saved[6], directory)
        if saved_environ is not None:
            _environ_swap(saved_environ)
        try:
            os.chdir(saved[4])
        except OSError:
            pass
    return status


def _environ_swap(values):
    """Makes `os.environ` read `values` ({name: text}); returns what it
    read before. Only the mapping changes: the process's environment
    (`putenv`, fenced in the sandbox) is left alone."""
    data = getattr(os.environ, "_data", None)
    if data is None:
        return {}
    before = {os.environ.decodekey(k): os.environ.decodevalue(v) for k, v in data.items()}
    data.clear()
    for name, value in values.items():
        data[os.environ.encodekey(name)] = os.environ.encodevalue(value)
    return before


def _forget_modules(before, directory):
    """Drops the modules the code imported from its own directory, so the
    next `python3` imports them afresh, as a new process would."""
    if directory is None:
        return
    prefix = directory.rstrip("/") + "/"
    for name in [n for n in sys.modules if n not in before]:
        path = getattr(sys.modules[name], "__file__", None) or ""
        if path.startswith(prefix):
            del sys.modules[name]


def _plain_compile(source, filename):
    return builtins.compile(source, filename, "exec", dont_inherit=True)


#: Set by the runtime: exceptions that stop the program itself (the time
#: limit, the output cap), which no command may catch.
control_exceptions = ()


def _is_control(exc):
    return bool(control_exceptions) and isinstance(exc, control_exceptions)


def _exit_status(exc, err):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    err.write("%s\n" % (code,))
    return 1


def _python_traceback(exc, filename, err, directory=None):
    """CPython's report of an uncaught exception, with the program's own
    frames only: its file's and those of modules it imported from its
    directory (not the library's)."""
    prefix = (directory or "\0").rstrip("/") + "/"

    def own(frame):
        return frame.filename == filename or frame.filename.startswith(prefix)

    try:
        report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        seen = set()
        node = report
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            node.stack = traceback.StackSummary.from_list([frame for frame in node.stack if own(frame)])
            node = node.__cause__ or node.__context__
        err.write("".join(report.format()))
    except Exception:
        err.write("%s: %s\n" % (type(exc).__name__, exc))


_SHELL_BUILTINS = {"true", "false", "echo", "printf", "pwd", "cd", "exit", "set", "export",
                   "unset", "test", "[", "command", "read", "break", "continue"}

COMMANDS = {
    "true": _true, ":": _true, "false": _false,
    "cat": _cat, "echo": _echo, "printf": _printf,
    "ls": _ls, "mkdir": _mkdir, "rm": _rm, "cp": _cp, "mv": _mv,
    "head": _head, "tail": _tail, "wc": _wc,
    "pwd": _pwd, "cd": _cd, "touch": _touch, "base64": _base64,
    "exit": _exit, "set": _set, "export": _export, "unset": _unset, "read": _read,
    "break": _break, "continue": lambda *a: _break(*a, kind="continue"),
    "test": _test, "[": lambda *a: _test(*a, bracket=True),
    "grep": _grep, "sort": _sort, "uniq": _uniq, "sleep": _sleep, "date": _date,
    "which": _which, "command": _command, "env": _env,
    "python3": _python, "python": _python,
}


def run(script, argv=(), stdout=None, stderr=None, home="/mnt/data"):
    """Runs a command line; returns its exit status. `home`: what `~` and
    `cd` alone reach. As bash does, it runs each line once it has parsed
    it, so a syntax error stops the text only from its own line on."""
    out = Sink(stream=stdout or sys.stdout)
    err = Sink(stream=stderr or sys.stderr)
    shell = Shell(argv, out, err, home)
    lexer = Lexer(script)
    parser = Parser(lexer.tokens(), script)
    while True:
        try:
            node = parser.complete_command()
        except ShellSyntaxError as e:
            _report_syntax(lexer, e, err)
            return 2
        _report_syntax(lexer, None, err)
        if node is None:
            return shell.status
        try:
            shell.run_list(node, _Input(b""), out, err)
        except _ExitShell as e:
            return e.status
        except ShellSyntaxError as e:
            _report_syntax(lexer, e, err)
            return 2


def _report_syntax(lexer, error, err):
    """The lexer's warnings, then the syntax error if any, as bash words
    them (`bash: ...` then `` bash: `the line' ``)."""
    for warning in lexer.warnings:
        err.write("bash: %s\n" % warning)
    lexer.warnings = []
    if error is not None:
        err.write("bash: %s\n" % error)
        if error.line is not None:
            err.write("bash: `%s'\n" % error.line)
