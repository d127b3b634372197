#!/usr/bin/env python3
"""bats-checks: find bats checks that cannot fail.

A bats test fails only when a command fails under `set -e`, or when its last
command fails.  Bash ignores the status of a negated command (`! cmp a b`)
and of an `a && b` list whose failure comes from an element before the last
`&&` (`[ "$x" = 1 ] && [ "$y" = 2 ]` passes when x is 2), except where that
status becomes the test's (or a function's) own: its last command.  Such a
check cannot fail, so breaking the code it guards leaves the test green.
The project rule: every check can fail - `run ! CMD`, `[ ... ] || false`,
one check per line.

This script parses the shell of bats files (enough of bash: quotes, $( ),
heredocs, line continuations, comments, compound commands) and reports, in
every @test body and every function (helpers included), each command that
cannot fail where it stands:

  - a negated command (`! CMD`; `run ! CMD` is fine) that is not the last
    command of its test or function;
  - a list whose last operator is `&&` (`a && b`, `a || b && c`) that is not
    the last command: a failure before that `&&` is ignored.  `a && b || c`
    is fine (c runs, and its failure counts), and so is a conditional action,
    whose last element is an assignment, a group `{ ...; }`, or one of break,
    continue, return, exit, skip, false (`[ -n "$x" ] && return 1` fails the
    test when x is set: that is its check).

Commands in the body of an if, a loop, a case or a `{ }` group are checked
too; their last command counts as last only where the compound command is
itself the last of the test or function (bash ignores a negated status that
ends an `if` body in mid-test), while a subshell's last command gives the
subshell its status, as a function's does.  Conditions (of `if`, `while`,
and the elements of a list before its last) are conditions, not checks, and
command substitutions do not inherit `set -e`: neither is looked into.

Usage: tests/lint/bats-checks.py [FILE...]
  With no FILE: tests/cli/*.bats and tests/cli/helper.bash.  A directory
  stands for its *.bats and *.bash files.
  Prints FILE:LINE: REASON: LINE-TEXT for each finding on standard output,
  then a one-line summary on standard error.
  Exit status: 0 clean, 1 findings (or a file it cannot parse), 2 usage error.
"""

import bisect
import glob
import os
import re
import sys

NEGATED = "negated command cannot fail here (use run ! CMD)"
AND_LIST = "&& list cannot fail here (one check per line, or end it with || false)"

# longest first, so that ";;&" is not read as ";;" then "&"
OPERATORS = sorted([";;&", ";;", ";&", "&&", "||", "|&", "&>>", "&>", "<<<", "<<-",
                    "<<", ">>", ">&", "<&", "<>", ">|", ";", "&", "|", "<", ">", "(", ")"],
                   key=len, reverse=True)
REDIRECTIONS = {"<", ">", ">>", "<<", "<<-", "<<<", ">&", "<&", "&>", "&>>", "<>", ">|"}
LIST_ENDS = {")", ";;", ";&", ";;&"}
# after these a "((" opens an arithmetic command, not two subshells
COMMAND_START_WORDS = {"then", "do", "else", "elif", "if", "while", "until", "!", "{", "for", "time"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
# the last element of an && list that makes it a condition with an action,
# not a check
ACTIONS = {"break", "continue", "return", "exit", "skip", "false"}


class ParseError(Exception):
    def __init__(self, pos, message):
        super().__init__(message)
        self.pos = pos


class Token:
    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind, value, pos):
        self.kind = kind    # "word", "arith", "ionum", "op", "nl", "eof"
        self.value = value
        self.pos = pos

    def is_word(self, *values):
        return self.kind == "word" and (not values or self.value in values)

    def is_op(self, *values):
        return self.kind == "op" and (not values or self.value in values)


class Lexer:
    """Splits shell text into tokens.  With nested=True it reads the inside of
    a $( ) and stops after its closing parenthesis (self.pos)."""

    def __init__(self, text, pos=0, nested=False):
        self.s = text
        self.pos = pos
        self.nested = nested
        self.depth = 0
        self.tokens = []
        self.heredocs = []      # (delimiter, strip tabs) waiting for the next newline
        self.want_delimiter = None

    def run(self):
        s, n = self.s, len(self.s)
        while True:
            i = self.pos
            while i < n:  # blanks and line continuations
                if s[i] in " \t":
                    i += 1
                elif s.startswith("\\\n", i):
                    i += 2
                else:
                    break
            self.pos = i
            if i >= n:
                if self.nested:
                    raise ParseError(i, "unclosed $(")
                if self.heredocs:
                    raise ParseError(i, "heredoc %s not closed" % self.heredocs[0][0])
                self.tokens.append(Token("eof", "", i))
                return self.tokens
            c = s[i]
            if c == "#":
                j = s.find("\n", i)
                self.pos = n if j < 0 else j
            elif c == "\n":
                self.tokens.append(Token("nl", "\n", i))
                self.pos = i + 1
                self.read_heredocs()
            elif c in "<>" and s.startswith("(", i + 1):
                self.word()  # process substitution
            elif c in ";&|<>()":
                op = next(o for o in OPERATORS if s.startswith(o, i))
                if op == "(" and s.startswith("((", i) and self.at_command_start():
                    j = self.skip_arith(i + 2)
                    self.tokens.append(Token("arith", s[i:j], i))
                    self.pos = j
                    continue
                if self.nested and op == "(":
                    self.depth += 1
                elif self.nested and op == ")":
                    if self.depth == 0:
                        self.pos = i + 1
                        return self.tokens
                    self.depth -= 1
                self.tokens.append(Token("op", op, i))
                self.pos = i + len(op)
                if op in ("<<", "<<-"):
                    self.want_delimiter = op
            else:
                self.word()

    def at_command_start(self):
        if not self.tokens:
            return True
        t = self.tokens[-1]
        if t.kind == "nl":
            return True
        if t.kind == "op":
            return t.value not in REDIRECTIONS
        return t.kind == "word" and t.value in COMMAND_START_WORDS

    def word(self):
        start = self.pos
        w = self.read_word()
        if self.want_delimiter:
            delim = w.replace("'", "").replace('"', "").replace("\\", "")
            self.heredocs.append((delim, self.want_delimiter == "<<-"))
            self.want_delimiter = None
        kind = "word"
        # "2>file", "{fd}>&-": a file descriptor, part of the redirection
        if self.s.startswith(("<", ">"), self.pos) and re.fullmatch(r"[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\}", w):
            kind = "ionum"
        self.tokens.append(Token(kind, w, start))

    def read_heredocs(self):
        s, n = self.s, len(self.s)
        for delim, strip in self.heredocs:
            i = self.pos
            while True:
                if i >= n:
                    raise ParseError(self.pos, "heredoc %s not closed" % delim)
                j = s.find("\n", i)
                end = n if j < 0 else j
                line = s[i:end]
                if strip:
                    line = line.lstrip("\t")
                i = end + 1
                if line == delim:
                    break
            self.pos = min(i, n)
        self.heredocs = []

    def read_word(self):
        s, n = self.s, len(self.s)
        i = self.pos
        buf = []
        while i < n:
            c = s[i]
            if c in " \t\n":
                break
            if c in ";&|<>()":
                if c in "<>" and s.startswith("(", i + 1):  # <( ) >( )
                    j = self.skip_cmdsub(i + 2)
                elif c == "(" and ASSIGNMENT.fullmatch("".join(buf)):  # a=(x y)
                    j = self.skip_cmdsub(i + 1)
                else:
                    break
                buf.append(s[i:j])
                i = j
                continue
            if c == "\\":
                if s.startswith("\n", i + 1):
                    i += 2
                else:
                    buf.append(s[i:i + 2])
                    i += 2
                continue
            if c == "'":
                j = s.find("'", i + 1)
                if j < 0:
                    raise ParseError(i, "unclosed '")
                j += 1
            elif c == '"':
                j = self.skip_dquote(i + 1)
            elif c == "`":
                j = self.skip_backquote(i + 1)
            elif c == "$" and s.startswith("'", i + 1):
                j = self.skip_ansi(i + 2)
            elif c == "$" and s.startswith('"', i + 1):
                j = self.skip_dquote(i + 2)
            elif c == "$" and s.startswith("((", i + 1):
                j = self.skip_arith(i + 3)
            elif c == "$" and s.startswith("(", i + 1):
                j = self.skip_cmdsub(i + 2)
            elif c == "$" and s.startswith("{", i + 1):
                j = self.skip_brace(i + 2)
            else:
                j = i + 1
            buf.append(s[i:j])
            i = j
        self.pos = i
        return "".join(buf)

    def skip_cmdsub(self, i):
        sub = Lexer(self.s, i, nested=True)
        sub.run()
        return sub.pos

    def skip_dquote(self, i):
        s, n = self.s, len(self.s)
        while i < n:
            c = s[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 2
            elif c == "`":
                i = self.skip_backquote(i + 1)
            elif c == "$" and s.startswith("((", i + 1):
                i = self.skip_arith(i + 3)
            elif c == "$" and s.startswith("(", i + 1):
                i = self.skip_cmdsub(i + 2)
            elif c == "$" and s.startswith("{", i + 1):
                i = self.skip_brace(i + 2)
            else:
                i += 1
        raise ParseError(i, 'unclosed "')

    def skip_ansi(self, i):
        s, n = self.s, len(self.s)
        while i < n:
            if s[i] == "\\":
                i += 2
            elif s[i] == "'":
                return i + 1
            else:
                i += 1
        raise ParseError(i, "unclosed $'")

    def skip_backquote(self, i):
        s, n = self.s, len(self.s)
        while i < n:
            if s[i] == "\\":
                i += 2
            elif s[i] == "`":
                return i + 1
            else:
                i += 1
        raise ParseError(i, "unclosed `")

    def skip_brace(self, i):
        s, n = self.s, len(self.s)
        depth = 1
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                j = s.find("'", i + 1)
                if j < 0:
                    raise ParseError(i, "unclosed '")
                i = j + 1
            elif c == '"':
                i = self.skip_dquote(i + 1)
            elif c == "`":
                i = self.skip_backquote(i + 1)
            elif c == "$" and s.startswith("(", i + 1):
                i = self.skip_cmdsub(i + 2)
            else:
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        return i + 1
                i += 1
        raise ParseError(i, "unclosed ${")

    def skip_arith(self, i):
        """i: just after "((" (or "$(("); returns the index after the "))"."""
        s, n = self.s, len(self.s)
        depth = 2
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "$" and s.startswith("(", i + 1) and not s.startswith("((", i + 1):
                i = self.skip_cmdsub(i + 2)
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise ParseError(i, "unclosed ((")


class Command:
    """kind: simple, arith, cond ([[ ]]), group, subshell, if, loop, case,
    function (a function or an @test).  bodies: the lists of commands that
    run as the command's own (not its conditions)."""

    def __init__(self, kind, pos, words=None, bodies=None, name=None):
        self.kind = kind
        self.pos = pos
        self.words = words or []
        self.bodies = bodies or []
        self.name = name


class Pipeline:
    def __init__(self, negated, commands, pos):
        self.negated = negated
        self.commands = commands
        self.pos = pos


class AndOr:
    def __init__(self, pipelines, ops, pos):
        self.pipelines = pipelines
        self.ops = ops
        self.pos = pos
        self.background = False


class Parser:
    def __init__(self, tokens):
        self.t = tokens
        self.i = 0

    def peek(self, k=0):
        return self.t[min(self.i + k, len(self.t) - 1)]

    def next(self):
        tok = self.t[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def expect_word(self, value):
        tok = self.next()
        if not tok.is_word(value):
            raise ParseError(tok.pos, "expected '%s', found '%s'" % (value, tok.value.strip() or tok.kind))
        return tok

    def skip_newlines(self):
        while self.peek().kind == "nl":
            self.next()

    def parse_program(self):
        body = self.parse_list(set())
        tok = self.peek()
        if tok.kind != "eof":
            raise ParseError(tok.pos, "unexpected '%s'" % tok.value)
        return body

    def parse_list(self, terminators):
        items = []
        while True:
            while self.peek().kind == "nl" or self.peek().is_op(";"):
                self.next()
            tok = self.peek()
            if tok.kind == "eof" or tok.is_op(*LIST_ENDS) or (tok.kind == "word" and tok.value in terminators):
                return items
            item = self.parse_and_or()
            items.append(item)
            tok = self.peek()
            if tok.is_op("&"):
                item.background = True
                self.next()
            elif tok.is_op(";") or tok.kind == "nl":
                self.next()
            elif not (tok.kind == "eof" or tok.is_op(*LIST_ENDS) or (tok.kind == "word" and tok.value in terminators)):
                raise ParseError(tok.pos, "unexpected '%s'" % tok.value)

    def parse_and_or(self):
        first = self.parse_pipeline()
        pipelines, ops = [first], []
        while self.peek().is_op("&&", "||"):
            ops.append(self.next().value)
            self.skip_newlines()
            pipelines.append(self.parse_pipeline())
        return AndOr(pipelines, ops, first.pos)

    def parse_pipeline(self):
        pos = self.peek().pos
        negated = False
        while self.peek().is_word("!", "time"):
            if self.next().value == "!":
                negated = not negated
            elif self.peek().is_word("-p"):
                self.next()
        commands = [self.parse_command()]
        while self.peek().is_op("|", "|&"):
            self.next()
            self.skip_newlines()
            commands.append(self.parse_command())
        return Pipeline(negated, commands, pos)

    def parse_redirections(self):
        while True:
            tok = self.peek()
            if tok.kind == "ionum":
                self.next()
            elif tok.is_op(*REDIRECTIONS):
                self.next()
                if self.next().kind != "word":
                    raise ParseError(tok.pos, "a redirection without a target")
            else:
                return

    def parse_command(self):
        tok = self.peek()
        pos = tok.pos
        if tok.is_op("("):
            self.next()
            body = self.parse_list(set())
            if not self.next().is_op(")"):
                raise ParseError(pos, "unclosed (")
            self.parse_redirections()
            return Command("subshell", pos, bodies=[body])
        if tok.kind == "arith":
            self.next()
            return Command("arith", pos)
        if tok.kind == "word":
            v = tok.value
            if v == "{":
                self.next()
                body = self.parse_list({"}"})
                self.expect_word("}")
                self.parse_redirections()
                return Command("group", pos, bodies=[body])
            if v == "if":
                self.next()
                bodies = []
                while True:
                    self.parse_list({"then"})           # a condition
                    self.expect_word("then")
                    bodies.append(self.parse_list({"elif", "else", "fi"}))
                    kw = self.next()
                    if kw.is_word("elif"):
                        continue
                    if kw.is_word("else"):
                        bodies.append(self.parse_list({"fi"}))
                        self.expect_word("fi")
                    elif not kw.is_word("fi"):
                        raise ParseError(kw.pos, "expected fi")
                    break
                self.parse_redirections()
                return Command("if", pos, bodies=bodies)
            if v in ("while", "until"):
                self.next()
                self.parse_list({"do"})                 # a condition
                return self.parse_do(pos)
            if v in ("for", "select"):
                self.next()
                if self.peek().kind == "arith":
                    self.next()
                else:
                    if self.next().kind != "word":
                        raise ParseError(pos, "for without a name")
                    self.skip_newlines()
                    if self.peek().is_word("in"):
                        self.next()
                        while self.peek().kind == "word":
                            self.next()
                while self.peek().kind == "nl" or self.peek().is_op(";"):
                    self.next()
                return self.parse_do(pos)
            if v == "case":
                return self.parse_case(pos)
            if v == "[[":
                self.next()
                while not self.peek().is_word("]]"):
                    if self.next().kind == "eof":
                        raise ParseError(pos, "unclosed [[")
                self.next()
                self.parse_redirections()
                return Command("cond", pos, words=["[["])
            if v == "function":
                self.next()
                name = self.next().value
                if self.peek().is_op("(") and self.peek(1).is_op(")"):
                    self.next()
                    self.next()
                self.skip_newlines()
                return Command("function", pos, bodies=[self.function_body()], name=name)
            if v == "@test":  # bats: @test "name" { ... }
                self.next()
                name = []
                while not self.peek().is_word("{"):
                    tok = self.next()
                    if tok.kind in ("eof", "nl"):
                        raise ParseError(pos, "@test without {")
                    name.append(tok.value)
                self.next()
                body = self.parse_list({"}"})
                self.expect_word("}")
                return Command("function", pos, bodies=[body], name="@test " + " ".join(name))
            if self.peek(1).is_op("(") and self.peek(2).is_op(")"):  # name() body
                self.next()
                self.next()
                self.next()
                self.skip_newlines()
                return Command("function", pos, bodies=[self.function_body()], name=v)
        if tok.kind in ("word", "ionum") or tok.is_op(*REDIRECTIONS):
            words = []
            while True:
                tok = self.peek()
                if tok.kind == "word":
                    words.append(self.next().value)
                elif tok.kind == "ionum" or tok.is_op(*REDIRECTIONS):
                    self.parse_redirections()
                else:
                    break
            return Command("simple", pos, words=words)
        raise ParseError(pos, "unexpected '%s'" % (tok.value.strip() or tok.kind))

    def function_body(self):
        # the body is a compound command; its last command gives the status
        cmd = self.parse_command()
        if cmd.kind in ("group", "subshell"):
            return cmd.bodies[0]
        return [AndOr([Pipeline(False, [cmd], cmd.pos)], [], cmd.pos)]

    def parse_do(self, pos):
        self.expect_word("do")
        body = self.parse_list({"done"})
        self.expect_word("done")
        self.parse_redirections()
        return Command("loop", pos, bodies=[body])

    def parse_case(self, pos):
        self.next()
        if self.next().kind != "word":
            raise ParseError(pos, "case without a word")
        self.skip_newlines()
        self.expect_word("in")
        bodies = []
        while True:
            self.skip_newlines()
            if self.peek().is_word("esac"):
                self.next()
                break
            if self.peek().is_op("("):
                self.next()
            while not self.peek().is_op(")"):  # the patterns
                tok = self.next()
                if not (tok.kind == "word" or tok.is_op("|")):
                    raise ParseError(tok.pos, "bad case pattern")
            self.next()
            bodies.append(self.parse_list({"esac"}))
            if self.peek().is_op(";;", ";&", ";;&"):
                self.next()
        self.parse_redirections()
        return Command("case", pos, bodies=bodies)


def is_action(pipeline):
    """The last element of an && list that makes the list a condition with an
    action rather than a check."""
    if pipeline.negated or len(pipeline.commands) != 1:
        return False
    cmd = pipeline.commands[0]
    if cmd.kind == "group":
        return True
    if cmd.kind != "simple" or not cmd.words:
        return False
    return cmd.words[0] in ACTIONS or all(ASSIGNMENT.match(w) for w in cmd.words)


class Checker:
    def __init__(self):
        self.findings = []   # (pos, reason)

    def function(self, cmd):
        self.commands(cmd.bodies[0], last=True)

    def commands(self, items, last):
        """items: a list of commands; last: whether the status of the list's
        last command is the function's (or subshell's) own."""
        for k, item in enumerate(items):
            self.and_or(item, last and k == len(items) - 1)

    def and_or(self, item, last):
        if item.background:
            return
        final = item.pipelines[-1]
        if item.ops and item.ops[-1] == "&&" and not is_action(final):
            reason = AND_LIST
        elif final.negated:
            reason = NEGATED
        else:
            reason = None
        if reason and not last:
            self.findings.append((item.pos, reason))
        if final.negated:
            return  # set -e is off inside a negated command
        # only the last command of the list's last pipeline runs under set -e
        # with its status counted; what is before it is a condition
        self.command(final.commands[-1], last)

    def command(self, cmd, last):
        if cmd.kind == "function":
            self.function(cmd)
        elif cmd.kind == "subshell":
            self.commands(cmd.bodies[0], True)
        elif cmd.kind in ("group", "if", "loop", "case"):
            for body in cmd.bodies:
                self.commands(body, last)


def functions(items):
    """Every function and @test defined at the top of a file or inside
    another's body (Checker.function looks into the bodies)."""
    for item in items:
        for pipeline in item.pipelines:
            for cmd in pipeline.commands:
                if cmd.kind == "function":
                    yield cmd
                elif cmd.kind in ("group", "subshell", "if", "loop", "case"):
                    for body in cmd.bodies:
                        yield from functions(body)


def lint_file(path):
    """Returns ([(line, reason, text)], parse error or None)."""
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    lines = text.split("\n")

    def line_of(pos):
        return bisect.bisect_right(line_starts, pos)

    try:
        program = Parser(Lexer(text).run()).parse_program()
    except ParseError as e:
        return [], "%s:%d: cannot parse: %s" % (path, line_of(e.pos), e)
    checker = Checker()
    for fn in functions(program):
        checker.function(fn)
    found = sorted(set((line_of(pos), reason) for pos, reason in checker.findings))
    return [(n, reason, lines[n - 1].strip()) for n, reason in found], None


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    args = argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if args and args[0] == "--":
        args = args[1:]
    elif args and args[0].startswith("-") and args[0] != "-":
        print("bats-checks: unknown option '%s' (usage: bats-checks.py [FILE...])" % args[0], file=sys.stderr)
        return 2
    if not args:
        cli = os.path.relpath(os.path.join(here, "..", "cli"))
        files = sorted(glob.glob(os.path.join(cli, "*.bats"))) + [os.path.join(cli, "helper.bash")]
    else:
        files = []
        for a in args:
            if os.path.isdir(a):
                files += sorted(glob.glob(os.path.join(a, "*.bats")) + glob.glob(os.path.join(a, "*.bash")))
            else:
                files.append(a)
    missing = [f for f in files if not os.path.isfile(f)]
    if missing or not files:
        print("bats-checks: no such file: %s" % (" ".join(missing) or " ".join(args)), file=sys.stderr)
        return 2
    count, bad_files, errors = 0, 0, 0
    for path in files:
        found, error = lint_file(path)
        if error:
            errors += 1
            print(error)
        for n, reason, text in found:
            print("%s:%d: %s: %s" % (path, n, reason, text))
        count += len(found)
        bad_files += bool(found)
    sys.stdout.flush()
    if count or errors:
        print("bats-checks: %d check(s) that cannot fail in %d of %d file(s)%s"
              % (count, bad_files, len(files), ", %d file(s) not parsed" % errors if errors else ""),
              file=sys.stderr)
        return 1
    print("bats-checks: %d file(s), every check can fail" % len(files), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
