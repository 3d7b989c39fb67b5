"""A hand-written synonym table for the "title" and "paraphrase" query families.

Why hand-written: the paraphrase family must have low lexical overlap with its target and be
reproducible on a machine with no network and no language model, so each common technical
English word of the Python and PostgreSQL manuals gets a few plain-English substitutes that
share no stem with it. Meaning is kept roughly, not exactly; that is the point of the family
(a person remembering the gist, not the wording).

Entries are base forms plus the inflections that occur often; ``lookup`` also maps a plural
or third-person '-s'/'-es' form to its base entry and inflects the substitute's last word.
"""

from __future__ import annotations

_TABLE = """
able: capable, in a position
about: regarding, concerning
accept: take, admit
accepts: takes, admits
access: reach, get at
accessed: reached, read
according: as per, in line with
account: profile, login
action: step, act
active: live, running
actual: real, true
actually: really, in fact
add: append, put in
added: appended, put in
adding: appending, putting in
additional: extra, further
address: location, endpoint
affect: influence, change
aggregate: summary, combined
allocate: reserve, set aside
allow: permit, let
allowed: permitted, let
allows: permits, lets
already: previously, by now
also: too, as well
alternative: other, substitute
always: every time, invariably
application: program, app
apply: use, put into effect
applied: used, put into effect
argument: parameter, input
arguments: parameters, inputs
array: vector, sequence
assign: give, set
assigned: given, set
associated: linked, related
asynchronous: non-blocking, async
attempt: try, effort
attribute: property, field
attributes: properties, fields
authentication: login check, identity check
automatic: implicit, self-acting
automatically: implicitly, on its own
available: present, on hand
avoid: prevent, steer clear of
backup: snapshot, safety copy
base: foundation, root
based: founded, built
basic: simple, elementary
become: turn into, get
becomes: turns into, gets
before: prior to, ahead of
begin: start, commence
beginning: start, outset
behavior: conduct, workings
behaviour: conduct, workings
between: among, amid
binary: compiled, non-text
block: chunk, stall
body: content, main part
boolean: true-or-false, truth value
both: the two, each
buffer: staging area, holding area
bug: defect, fault
build: construct, assemble
built: constructed, assembled
byte: octet, eight bits
bytes: octets, raw data
cache: memo store, stash
call: invoke, run
called: invoked, named
calling: invoking, running
calls: invokes, runs
cannot: can not, is unable to
case: situation, instance
cases: situations, instances
cause: make, lead to
causes: makes, leads to
certain: some, particular
change: alter, modify
changed: altered, modified
changes: alterations, edits
character: symbol, glyph
characters: symbols, glyphs
check: verify, test
checked: verified, tested
child: descendant, sub
choose: pick, opt for
class: type, blueprint
classes: types, blueprints
clause: part, phrase
clear: empty, wipe
client: consumer, caller
close: shut, end
closed: shut, ended
code: program text, source
collection: group, set
column: field, attribute
columns: fields, attributes
combine: merge, join up
command: instruction, order
commands: instructions, orders
commit: confirm, finalize
common: usual, frequent
compare: contrast, match up
comparison: contrast, matching
compatible: interoperable, consistent
compile: build, translate
complete: finish, full
completed: finished, done
complex: complicated, intricate
compute: calculate, work out
condition: test, criterion
conditions: tests, criteria
configuration: setup, settings
configure: set up, tune
connection: link, session
connections: links, sessions
consider: regard, weigh
consist: comprise, be made
constant: fixed value, literal
constraint: restriction, rule
constraints: restrictions, rules
construct: build, form
contain: hold, include
contained: held, included
containing: holding, including
contains: holds, includes
content: material, substance
contents: material, substance
context: setting, surroundings
continue: go on, proceed
control: govern, steer
convert: transform, turn
converted: transformed, turned
copy: duplicate, clone
correct: right, proper
correctly: properly, rightly
corresponding: matching, related
could: might, may
count: tally, number
create: make, set up
created: made, set up
creates: makes, sets up
creating: making, setting up
current: present, active
currently: presently, now
cursor: pointer, position marker
custom: bespoke, user-defined
data: information, records
database: data store, repository
databases: data stores, repositories
date: day, calendar day
decimal: base-ten, fractional
declare: announce, state
default: standard, preset
defaults: presets, fallbacks
define: specify, declare
defined: specified, declared
defines: specifies, declares
definition: specification, declaration
delete: remove, erase
deleted: removed, erased
dependent: reliant, contingent
deprecated: obsolete, discouraged
describe: explain, outline
described: explained, outlined
describes: explains, outlines
description: explanation, account
detail: particular, specifics
details: particulars, specifics
determine: decide, establish
determines: decides, establishes
different: distinct, other
directly: straight, immediately
directory: folder, catalog
directories: folders, catalogs
disable: turn off, switch off
disabled: turned off, switched off
display: show, present
distinct: separate, unique
document: paper, text
documentation: manual, guide
does: performs, carries out
during: throughout, while
dynamic: changing, runtime
each: every, per
easily: readily, simply
effect: result, impact
element: item, member
elements: items, members
empty: blank, vacant
enable: turn on, switch on
enabled: turned on, switched on
encoding: charset, character set
end: finish, close
entire: whole, full
entry: record, item
entries: records, items
environment: surroundings, setup
equal: same, identical
equivalent: same as, identical to
error: fault, failure
errors: faults, failures
especially: particularly, notably
evaluate: assess, compute
evaluated: assessed, computed
event: occurrence, happening
events: occurrences, happenings
every: each, all
exactly: precisely, just
example: sample, illustration
examples: samples, illustrations
except: apart from, save
exception: error, fault
exceptions: errors, faults
execute: run, carry out
executed: run, carried out
execution: running, carrying out
exist: be present, occur
existing: present, current
exists: is present, occurs
expected: anticipated, foreseen
explicit: stated, express
explicitly: expressly, deliberately
expression: formula, term
expressions: formulas, terms
extend: widen, lengthen
extension: add-on, plugin
external: outside, foreign
fail: break, go wrong
fails: breaks, goes wrong
failure: breakdown, fault
false: untrue, wrong
feature: capability, facility
features: capabilities, facilities
field: slot, member
fields: slots, members
file: document, record on disk
files: documents, records on disk
filter: screen, sift
final: last, closing
find: locate, discover
first: initial, earliest
fixed: constant, set
flag: marker, switch
float: real, decimal number
following: below, subsequent
follows: comes next, goes on
form: shape, variant
format: layout, shape
found: located, discovered
free: release, unused
full: complete, entire
function: routine, procedure
functions: routines, procedures
further: more, additional
general: overall, broad
generate: produce, make
generated: produced, made
generator: producer, yielder
given: supplied, provided
global: module-wide, worldwide
group: set, bunch
groups: sets, bunches
handle: deal with, manage
handler: processor, callback
handling: dealing with, managing
have: possess, own
header: heading, preamble
hold: keep, contain
however: but, nonetheless
identifier: name, label
ignore: disregard, skip
ignored: disregarded, skipped
implement: realise, carry out
implementation: realisation, code
implemented: realised, coded
import: load, bring in
important: significant, crucial
include: contain, comprise
included: contained, comprised
includes: contains, comprises
including: containing, such as
incorrect: wrong, faulty
increase: raise, grow
independent: separate, standalone
index: lookup structure, key structure
indexes: lookup structures, key structures
indicate: signal, show
indicates: signals, shows
individual: single, separate
information: details, facts
initial: first, starting
input: entry, source data
insert: add, put in
inserted: added, put in
instance: object, occurrence
instead: rather, in place
integer: whole number, int
integers: whole numbers, ints
interface: boundary, api
internal: inner, private
interpreter: runtime, evaluator
introduced: added, brought in
invalid: bad, illegal
invoked: called, triggered
issue: problem, concern
item: entry, element
items: entries, elements
iterate: loop, step through
iterator: cursor, stepper
itself: its own self, alone
join: merge, combine
keep: retain, preserve
key: identifier, label
keys: identifiers, labels
keyword: named, reserved word
known: recognised, familiar
language: tongue, syntax
large: big, huge
last: final, latest
later: after, subsequent
least: fewest, minimum
left: remaining, leftward
length: size, extent
less: fewer, smaller
level: tier, degree
library: toolkit, package
like: such as, similar to
limit: cap, bound
limited: capped, bounded
line: row, record
lines: rows, records
list: sequence, array
lists: sequences, arrays
load: read in, bring in
local: nearby, on-machine
location: place, position
lock: latch, mutex
log: journal, record
logging: journaling, recording
long: lengthy, extended
look: search, check
loop: cycle, iteration
lower: smaller, reduced
main: primary, principal
maintain: keep up, preserve
make: create, produce
makes: creates, produces
manage: handle, administer
manager: handler, administrator
manual: handbook, guide
many: numerous, lots of
mapping: dictionary, association
match: fit, agree
matches: fits, agrees
matching: fitting, agreeing
maximum: highest, largest
mean: signify, imply
means: signifies, implies
memory: ram, storage
message: notice, note
messages: notices, notes
method: routine, member function
methods: routines, member functions
might: could, may
minimum: lowest, smallest
missing: absent, lacking
mode: setting, state
modify: change, alter
modified: changed, altered
module: library, unit
modules: libraries, units
more: extra, additional
most: largest part, majority
multiple: several, many
must: has to, needs to
name: label, identifier
named: labeled, called
names: labels, identifiers
necessary: needed, required
need: require, want
needed: required, wanted
needs: requires, wants
negative: minus, below zero
network: net, link
never: not ever, at no time
new: fresh, novel
next: following, subsequent
normal: regular, ordinary
normally: usually, ordinarily
note: remark, comment
nothing: none, no thing
number: figure, count
numbers: figures, counts
numeric: numerical, number-based
object: instance, entity
objects: instances, entities
obtain: get, acquire
occur: happen, arise
occurs: happens, arises
often: frequently, commonly
older: earlier, previous
omitted: left out, dropped
only: solely, just
open: launch, unlock
opened: launched, unlocked
operating: running, working
operation: action, procedure
operations: actions, procedures
operator: symbol, sign
operators: symbols, signs
option: choice, setting
optional: elective, not required
options: choices, settings
order: sequence, ordering
ordinary: regular, plain
original: initial, first
otherwise: else, if not
output: result, printout
overhead: cost, burden
override: supersede, replace
owner: holder, proprietor
package: bundle, distribution
parameter: argument, setting
parameters: arguments, settings
parent: enclosing, ancestor
parse: analyze, interpret
parser: analyzer, reader
part: portion, section
partial: incomplete, fragmentary
particular: specific, certain
pass: hand over, give
passed: handed over, given
password: passphrase, secret
path: route, location
pattern: template, shape
perform: carry out, do
performance: speed, efficiency
performed: carried out, done
permission: right, authorisation
permissions: rights, authorisations
place: position, spot
plan: scheme, strategy
point: spot, position
pointer: reference, address
position: place, location
positive: above zero, plus
possible: feasible, doable
possibly: perhaps, maybe
prefix: leading part, head
present: existing, there
prevent: stop, block
previous: prior, earlier
previously: before, earlier
print: display, output
private: internal, hidden
probably: likely, presumably
problem: issue, trouble
procedure: routine, function
process: task, job
processes: tasks, jobs
processing: handling, treatment
produce: yield, create
produces: yields, creates
program: application, software
programs: applications, software
properly: correctly, rightly
property: attribute, trait
protocol: convention, scheme
provide: supply, offer
provided: supplied, offered
provides: supplies, offers
public: open, exposed
query: request, lookup
queries: requests, lookups
quote: cite, enclose
quoted: enclosed, cited
raise: throw, signal
raised: thrown, signalled
raises: throws, signals
range: span, interval
rather: instead, somewhat
reached: attained, hit
read: load, scan
reading: loading, scanning
reads: loads, scans
reason: cause, motive
receive: get, take in
record: entry, row
records: entries, rows
reference: pointer, handle
references: pointers, handles
regular: normal, standard
related: connected, associated
release: free, version
remain: stay, persist
remove: delete, take out
removed: deleted, taken out
replace: substitute, swap
replaced: substituted, swapped
replication: mirroring, copying
report: notify, announce
represent: stand for, denote
representation: depiction, encoding
represents: stands for, denotes
request: ask, demand
require: need, demand
required: needed, mandatory
requires: needs, demands
reserved: set aside, kept
resource: asset, facility
resources: assets, facilities
respectively: in turn, in that order
restore: recover, bring back
restriction: limit, constraint
result: outcome, output
results: outcomes, outputs
retrieve: fetch, get back
return: give back, hand back
returned: given back, handed back
returns: gives back, hands back
reverse: invert, flip
right: correct, rightward
role: part, function
root: base, top
row: record, tuple
rows: records, tuples
rule: regulation, principle
rules: regulations, principles
run: execute, launch
running: executing, launching
runs: executes, launches
same: identical, equal
save: store, keep
schema: namespace, layout
script: program, batch file
search: look up, seek
second: next, latter
section: part, chapter
security: safety, protection
see: consult, refer to
select: choose, pick
selected: chosen, picked
send: transmit, dispatch
separate: distinct, independent
separated: divided, split
sequence: series, succession
server: host, service
session: connection, sitting
set: assign, configure
sets: assigns, configures
setting: parameter, configuration
settings: parameters, configurations
several: various, a number of
shared: common, joint
should: ought to, is expected to
show: display, reveal
shown: displayed, revealed
shows: displays, reveals
signal: notify, alert
similar: alike, comparable
simple: basic, plain
simply: just, merely
since: because, as
single: one, sole
size: length, magnitude
skip: omit, pass over
small: little, tiny
socket: endpoint, network handle
some: certain, several
sort: order, arrange
sorted: ordered, arranged
source: origin, input
space: room, area
special: particular, distinct
specific: particular, precise
specified: given, stated
specifies: gives, states
specify: give, state
standard: default, regular
start: begin, launch
started: begun, launched
starting: beginning, launching
state: status, condition
statement: command, instruction
statements: commands, instructions
statistics: figures, metrics
status: state, condition
still: yet, even now
stop: halt, cease
storage: persistence, space
store: keep, save
stored: kept, saved
stream: flow, channel
string: text, character sequence
strings: texts, character sequences
structure: layout, arrangement
subclass: derived type, child type
subsequent: later, following
successful: winning, completed
such: this kind of, those
suitable: appropriate, fit
support: handle, back
supported: handled, backed
supports: handles, backs
syntax: grammar, notation
system: platform, machine
table: relation, grid
tables: relations, grids
target: destination, goal
task: job, chore
temporary: transient, short-lived
terminal: console, tty
test: check, trial
text: prose, characters
therefore: hence, thus
thread: lightweight process, worker
threads: lightweight processes, workers
through: via, by way of
time: moment, duration
timeout: time limit, deadline
together: jointly, combined
token: lexeme, unit
total: sum, overall
transaction: unit of work, atomic batch
transactions: units of work, atomic batches
trigger: fire, set off
true: correct, valid
type: kind, sort
types: kinds, sorts
typically: usually, generally
unique: distinct, one-of-a-kind
unless: except if, if not
until: till, up to
update: refresh, modify
updated: refreshed, modified
usage: use, utilisation
use: utilise, employ
used: utilised, employed
useful: handy, helpful
user: person, account
users: people, accounts
uses: utilises, employs
using: utilising, employing
usually: generally, typically
valid: legal, acceptable
value: quantity, setting
values: quantities, settings
variable: name, placeholder
variables: names, placeholders
various: assorted, sundry
version: release, edition
versions: releases, editions
view: perspective, virtual table
wait: pause, hold on
warning: caution, alert
whether: if, in case
which: that, what
while: whereas, during
whole: entire, complete
within: inside, in
without: lacking, with no
work: function, operate
works: functions, operates
write: store, output
writes: stores, outputs
writing: storing, outputting
written: stored, output
wrong: incorrect, mistaken
"""


def _parse(table: str) -> dict[str, tuple[str, ...]]:
    """'word: a, b' lines -> {word: (a, b)}."""
    out: dict[str, tuple[str, ...]] = {}
    for line in table.strip().splitlines():
        word, _, alts = line.partition(":")
        out[word.strip()] = tuple(a.strip() for a in alts.split(",") if a.strip())
    return out


#: word (lower case) -> substitutes sharing no stem with it.
SYNONYMS: dict[str, tuple[str, ...]] = _parse(_TABLE)


def _plural(phrase: str) -> str:
    """Inflect the last word of a substitute with -s/-es/-ies (good enough for queries)."""
    head, _, last = phrase.rpartition(" ")
    if last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def lookup(word: str) -> tuple[str, ...]:
    """Substitutes for a word (any case), handling plain '-s'/'-es' forms of table entries."""
    w = word.lower()
    if w in SYNONYMS:
        return SYNONYMS[w]
    for cut in (1, 2):
        base = w[:-cut]
        if w.endswith("es"[2 - cut :]) and base in SYNONYMS and len(base) > 2:
            # Inflecting "get at" gives "get ats": prefer one-word substitutes when any exist.
            single = tuple(s for s in SYNONYMS[base] if " " not in s)
            return tuple(_plural(s) for s in single or SYNONYMS[base])
    return ()
