#!/usr/bin/env python3
"""Checks the size rules: no source file over 800 lines, no function over 80 lines unless the
comment block right above it says why with a line starting `// Long:`.

A function here is a definition whose head starts in column 0 (namespace scope, as every
out-of-line definition in this tree is) and whose body ends at the next `}` in column 0;
inline member functions in class bodies are not measured.

Usage: scripts/check-size.py [FILE... | --root DIR]
  (default: every tracked C++ file of this checkout; --root: every C++ file of the repository
  at DIR). Prints one line per violation and a count; exits 1 when there is any.
"""
import os
import subprocess
import sys

FILE_LIMIT = 800
FUNCTION_LIMIT = 80
NOT_A_FUNCTION = ('namespace', 'struct', 'class', 'enum', 'using', 'template', '#', 'extern "C" {',
                  'static_assert', 'union', 'typedef', 'return', '//', '/*', ' *', '}')


def functions(lines):
    """Yields (first line index, line count, head) of each column-0 definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if (not line or not (line[0].isalpha() or line[0] in '~_') or '(' not in line
                or line.startswith(NOT_A_FUNCTION) or line.rstrip().endswith(';')):
            i += 1
            continue
        j = i
        while j < len(lines) and j < i + 10 and '{' not in lines[j] and not lines[j].rstrip().endswith(';'):
            j += 1
        if j >= len(lines) or '{' not in lines[j]:
            i += 1
            continue
        opened = lines[j]
        if opened.count('{') <= opened.count('}'):  # a one-line body
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith('}'):
            k += 1
        yield i, k - i + 1, line.strip()
        i = k + 1


def justified(lines, first):
    k = first - 1
    while k >= 0 and lines[k].startswith('//'):
        if lines[k].startswith('// Long:'):
            return True
        k -= 1
    # A template<...> line between the comment and the head.
    if k >= 0 and lines[k].startswith('template'):
        return justified(lines, k)
    return False


def main(paths):
    bad = 0
    for path in paths:
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        if lines and lines[-1] == '':
            lines.pop()
        if len(lines) > FILE_LIMIT:
            print(f'{path}: {len(lines)} lines (at most {FILE_LIMIT})')
            bad += 1
        if not path.endswith(('.cc', '.cpp')):
            continue
        for first, count, head in functions(lines):
            if count > FUNCTION_LIMIT and not justified(lines, first):
                print(f'{path}:{first + 1}: function of {count} lines (at most {FUNCTION_LIMIT} '
                      f'without a `// Long:` reason above it): {head[:80]}')
                bad += 1
    if bad:
        print(f'{bad} violation(s) of the size rules')
    return 1 if bad else 0


def tracked_files(root):
    """The C++ files of the repository at `root`: git's list when it is a checkout, else every
    .h/.cc under the source folders (a source archive)."""
    try:
        listed = subprocess.run(['git', 'ls-files', '*.cc', '*.h'], check=True, cwd=root,
                                capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for top in ('src', 'tools', 'tests', 'bench', 'fuzz', 'python'):
            for folder, _, names in os.walk(os.path.join(root, top)):
                listed += [os.path.relpath(os.path.join(folder, n), root) for n in names
                           if n.endswith(('.cc', '.h'))]
    return sorted(os.path.join(root, p) for p in listed if '/testdata/' not in p)


if __name__ == '__main__':
    args = sys.argv[1:]
    if args[:1] == ['--root']:
        sys.exit(main(tracked_files(args[1])))
    if not args:
        top = subprocess.run(['git', 'rev-parse', '--show-toplevel'], check=True,
                             capture_output=True, text=True).stdout.strip()
        sys.exit(main(tracked_files(top)))
    sys.exit(main(args))
