/* query_levels.c — a statement that would compare a level as text is refused, never answered.
 *
 * `level` holds a level's name with the collation `level`, which orders names by severity. SQLite
 * keeps a collation only on the column itself (and through CAST, unary + and a subquery's bare
 * column): what a function, an aggregate or CASE makes of it has none, so that
 * `max(level) ... HAVING worst >= 'error'`, `ifnull(level, '') >= 'warning'` or
 * `ORDER BY max(level)` compare names as text ('critical' < 'error'), which no value can prevent
 * (no text order of the names is their severity order). So before a statement runs, its bytecode
 * (EXPLAIN) is read, and every place where it orders (compares with < <= > >=, sorts, takes min()
 * or max()) a value that came from a `level` column must do it with the level collation. Equality
 * (=, !=, IN, CASE x WHEN, a lookup) as text agrees with the collation when both sides are level
 * names as the column spells them (lowercase) or text that names no level: it is refused only
 * when one side may be another spelling of a level ('ERROR', '6') or a value not known here. A
 * statement refused gets a sentence that says how to write it (severity, or COLLATE level).
 *
 * How the bytecode is read: a forward data flow over the program. For each register, two bits:
 * T, the value may be a level (from VColumn of the level column of `records` or `record`), and N,
 * it may be something a level collation reads as a level but text does not ('ERROR', ' Info', a
 * number, or any value not known here). A register holding a record (MakeRecord) has the two bits
 * per field. A level moves through Copy, SCopy, Move, the functions that hand back one of their
 * arguments (min, max, nullif, first_value, last_value, nth_value, lag, lead; ifnull, coalesce,
 * iif and CASE are compiled to copies), aggregate accumulators, records written to sorters and
 * ephemeral tables and read back (Column, SorterData, RowData; a pseudo cursor's register). A
 * text operation (upper(), ||, printf()) makes text, no level: compared as text, as documented. A
 * string constant is N only when it is another spelling of a level. Registers are followed per
 * instruction (SQLite reuses them); what a cursor holds is the union of what any instruction
 * wrote into it. Control flow follows jumps, subroutines (Gosub/Return: after a call, the
 * registers a subroutine never writes hold its caller's values, not its other callers') and
 * coroutines (InitCoroutine/Yield/EndCoroutine) to every place they may go, so that the analysis
 * may refuse more than it must, never less; an opcode not known here may have written N into P2
 * and P3. A program too large to follow per instruction (over 1 M register states) is followed
 * with one state for all instructions, which refuses more.
 *
 * The places checked (a T operand without the level collation):
 *
 *   Lt Le Gt Ge; min(), max()  refused
 *   Eq Ne; nullif()            refused when an operand may be N
 *   a keyed cursor             a T key field: refused when the cursor is read in order (a sorter:
 *                              ORDER BY, GROUP BY, a window; an index walked or range-sought),
 *                              else (DISTINCT, IN, a lookup) when a key field may be N
 *   Found NotFound NoConflict  a T key: refused when it may be N
 *   Compare, Seek*, Idx*       a T key: refused (they order)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "logbook_files.h"
#include "query_internal.h"

enum kind {
    K_OTHER, K_NUMBER_P1, K_NUMBER_P2, K_NUMBER_P3, K_STRING, K_NULL, K_COPY, K_SCOPY, K_MOVE, K_COLUMN, K_VCOLUMN,
    K_FUNCTION, K_AGG_STEP, K_AGG_VALUE, K_MAKE_RECORD, K_INSERT, K_ROW_DATA, K_SORTER_DATA, K_OPEN_PSEUDO,
    K_OPEN_DUP, K_OPEN_KEYED, K_VOPEN, K_ORDERING, K_EQUALITY, K_COMPARE, K_LOOKUP, K_SEEK, K_SORTER_COMPARE,
    K_ITERATE, K_COLLSEQ, K_GOTO, K_GOSUB, K_RETURN, K_INIT_COROUTINE, K_YIELD, K_END_COROUTINE, K_HALT, K_JUMP,
    K_JUMPS_P2, K_NOTHING
};

static const struct { const char *name; enum kind kind; } kinds[] = {
    /* Write something that is no level into P1, P2 or P3: a number, an address, text made. */
    {"AddImm", K_NUMBER_P1}, {"SoftNull", K_NUMBER_P1}, {"Integer", K_NUMBER_P2}, {"Int64", K_NUMBER_P2},
    {"Real", K_NUMBER_P2}, {"Blob", K_NUMBER_P2}, {"Variable", K_NUMBER_P2}, {"BeginSubrtn", K_NUMBER_P2},
    {"Rowid", K_NUMBER_P2}, {"IdxRowid", K_NUMBER_P2}, {"VRowid", K_NUMBER_P2}, {"NewRowid", K_NUMBER_P2},
    {"Sequence", K_NUMBER_P2}, {"Count", K_NUMBER_P2}, {"Not", K_NUMBER_P2}, {"BitNot", K_NUMBER_P2},
    {"IsTrue", K_NUMBER_P2}, {"ZeroOrNull", K_NUMBER_P2}, {"IntCopy", K_NUMBER_P2}, {"OffsetLimit", K_NUMBER_P2},
    {"Offset", K_NUMBER_P3}, {"Add", K_NUMBER_P3}, {"Subtract", K_NUMBER_P3}, {"Multiply", K_NUMBER_P3},
    {"Divide", K_NUMBER_P3}, {"Remainder", K_NUMBER_P3}, {"BitAnd", K_NUMBER_P3}, {"BitOr", K_NUMBER_P3},
    {"ShiftLeft", K_NUMBER_P3}, {"ShiftRight", K_NUMBER_P3}, {"Concat", K_NUMBER_P3}, {"And", K_NUMBER_P3},
    {"Or", K_NUMBER_P3}, {"String8", K_STRING}, {"String", K_STRING}, {"Null", K_NULL}, {"Copy", K_COPY},
    {"SCopy", K_SCOPY}, {"Move", K_MOVE}, {"Column", K_COLUMN}, {"VColumn", K_VCOLUMN},
    {"Function", K_FUNCTION}, {"PureFunc", K_FUNCTION}, {"AggStep", K_AGG_STEP}, {"AggStep1", K_AGG_STEP},
    {"AggInverse", K_AGG_STEP}, {"AggValue", K_AGG_VALUE}, {"MakeRecord", K_MAKE_RECORD},
    {"Insert", K_INSERT}, {"IdxInsert", K_INSERT}, {"SorterInsert", K_INSERT}, {"RowData", K_ROW_DATA},
    {"SorterData", K_SORTER_DATA}, {"OpenPseudo", K_OPEN_PSEUDO}, {"OpenDup", K_OPEN_DUP},
    {"SorterOpen", K_OPEN_KEYED}, {"OpenEphemeral", K_OPEN_KEYED}, {"OpenAutoindex", K_OPEN_KEYED},
    {"VOpen", K_VOPEN}, {"Lt", K_ORDERING}, {"Le", K_ORDERING}, {"Gt", K_ORDERING}, {"Ge", K_ORDERING},
    {"Eq", K_EQUALITY}, {"Ne", K_EQUALITY}, {"Compare", K_COMPARE}, {"Found", K_LOOKUP},
    {"NotFound", K_LOOKUP}, {"NoConflict", K_LOOKUP}, {"IdxGE", K_SEEK}, {"IdxGT", K_SEEK}, {"IdxLE", K_SEEK},
    {"IdxLT", K_SEEK}, {"SeekGE", K_SEEK}, {"SeekGT", K_SEEK}, {"SeekLE", K_SEEK}, {"SeekLT", K_SEEK},
    {"SorterCompare", K_SORTER_COMPARE}, {"Rewind", K_ITERATE}, {"Last", K_ITERATE}, {"Next", K_ITERATE},
    {"Prev", K_ITERATE}, {"Sort", K_ITERATE}, {"SorterSort", K_ITERATE}, {"SorterNext", K_ITERATE},
    {"CollSeq", K_COLLSEQ}, {"Goto", K_GOTO}, {"Gosub", K_GOSUB}, {"Return", K_RETURN},
    {"InitCoroutine", K_INIT_COROUTINE}, {"Yield", K_YIELD}, {"EndCoroutine", K_END_COROUTINE},
    {"Halt", K_HALT}, {"Jump", K_JUMP},
    /* Jumps to P2 that write nothing followed here. */
    {"Init", K_GOTO}, {"If", K_JUMPS_P2}, {"IfNot", K_JUMPS_P2}, {"IsNull", K_JUMPS_P2},
    {"NotNull", K_JUMPS_P2}, {"IsType", K_JUMPS_P2}, {"IfNullRow", K_JUMPS_P2}, {"ElseEq", K_JUMPS_P2},
    {"Once", K_JUMPS_P2}, {"IfPos", K_JUMPS_P2}, {"IfNotZero", K_JUMPS_P2}, {"DecrJumpZero", K_JUMPS_P2},
    {"SequenceTest", K_JUMPS_P2}, {"SeekRowid", K_JUMPS_P2}, {"NotExists", K_JUMPS_P2}, {"IfNoHope", K_JUMPS_P2},
    {"VFilter", K_JUMPS_P2}, {"VNext", K_JUMPS_P2}, {"MustBeInt", K_JUMPS_P2}, {"Filter", K_JUMPS_P2},
    {"IfNotOpen", K_JUMPS_P2}, {"IfSmaller", K_JUMPS_P2}, {"RowSetRead", K_JUMPS_P2}, {"RowSetTest", K_JUMPS_P2},
    {"SeekScan", K_JUMPS_P2},
    /* Neither jump nor write a register followed here (Affinity and Cast change a value's type
     * in place: a level stays one). */
    {"Affinity", K_NOTHING}, {"Cast", K_NOTHING}, {"RealAffinity", K_NOTHING}, {"TypeCheck", K_NOTHING},
    {"ResultRow", K_NOTHING}, {"Permutation", K_NOTHING}, {"Close", K_NOTHING}, {"NullRow", K_NOTHING},
    {"Transaction", K_NOTHING}, {"Noop", K_NOTHING}, {"Explain", K_NOTHING}, {"ResetSorter", K_NOTHING},
    {"ClrSubtype", K_NOTHING}, {"FilterAdd", K_NOTHING}, {"TableLock", K_NOTHING}, {"VBegin", K_NOTHING},
    {"ColumnsUsed", K_NOTHING}, {"CursorHint", K_NOTHING}, {"Trace", K_NOTHING},
};

/* Functions whose result may be one of their arguments, unchanged. */
static const char *const passing_functions[] = {"min", "max", "nullif", "first_value", "last_value",
                                                "nth_value", "lag", "lead", "any_value", "likely", "unlikely",
                                                "likelihood"};

/* How many registers a variadic function (P4 says "max(-1)") may read after P2: SQLite does not
 * say, so every register that may be one is taken. */
enum { VARIADIC_ARGUMENTS = 16, FIELDS = 32 };

/* A register's bits: T (may be a level) and N (may be another spelling of one, or unknown), per
 * field of a record; a value that is no record uses field 0. Fields from 31 on share bit 31. */
static uint64_t t_bit(int field) { return field < 0 ? 0 : (uint64_t)1 << (field < FIELDS - 1 ? field : FIELDS - 1); }
static uint64_t n_bit(int field) { return t_bit(field) << FIELDS; }
static const uint64_t T = 1, N = (uint64_t)1 << FIELDS, ALL_T = 0xFFFFFFFFu, ALL_N = ALL_T << FIELDS;

/* Field `field` of a record's bits, as a value's. */
static uint64_t field_of(uint64_t record, int field) {
    return ((record & t_bit(field)) ? T : 0) | ((record & n_bit(field)) ? N : 0);
}

/* A value's bits as field `field` of a record. */
static uint64_t as_field(uint64_t value, int field) {
    return ((value & T) ? t_bit(field) : 0) | ((value & N) ? n_bit(field) : 0);
}

typedef struct instruction {
    enum kind kind;
    int p1, p2, p3, p5;
    char *p4;
    char function[32];           /* Function, AggStep: the function's name */
    int arguments;               /* its argument count, -1 when variadic */
    int integer;                 /* an Integer (which may put a return address into a register) */
} instruction;

typedef struct keyinfo {
    int known;
    int key_fields;
    uint64_t level_fields;       /* t_bit(i): key field i compares with the level collation */
} keyinfo;

typedef struct analysis {
    lb_query *query;
    instruction *ops;
    int count;
    int registers, cursors;
    uint64_t *in;                /* count x registers: what each register holds before each op,
                                  * then one row more: the out-state being made */
    uint8_t *reached, *pending;  /* by instruction */
    int flow_insensitive;        /* too large to follow per instruction: one state for all */
    uint64_t *cursor_fields;     /* by cursor: the T and N bits of any record written into it */
    int *pseudo_register;        /* by cursor: a pseudo cursor's register, or -1 */
    int *records_cursor;         /* by cursor: a scan of `records` or `record` */
    int *dup_of;                 /* by cursor: the cursor whose b-tree it shares (OpenDup) */
    uint8_t *read_in_order;      /* by cursor: walked (Rewind, Next, SorterSort) or range-sought */
    keyinfo *keys;               /* by cursor */
    int cursors_changed;
    uint8_t **subroutine_writes; /* by Gosub: the registers its subroutine may write (a bitset) */
    const uint8_t *edge_mask;    /* flow(): only the registers whose bit is edge_keep, or all (NULL) */
    int edge_keep;
    int *trace;                  /* trace_subroutine(): instructions to visit, and how many */
    int traced;
    uint8_t *seen;
    struct edge {                /* successors(), once: by instruction from edge_first[i] */
        int to;
        const uint8_t *mask;
        int keep;
    } *edges;
    int *edge_first, edge_count, edge_capacity;
} analysis;

static int is_level_collation(const char *p4) {
    /* P4_COLLSEQ shows as "level-8" (its name and the encoding); KeyInfo fields by name. */
    return p4 && strncasecmp(p4, "level", 5) == 0 && (p4[5] == '\0' || p4[5] == '-' || p4[5] == ',' || p4[5] == ')');
}

static int named_in(const char *name, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strcasecmp(name, names[i]) == 0) return 1;
    return 0;
}

static int is_passing(const char *function) {
    return named_in(function, passing_functions, sizeof passing_functions / sizeof *passing_functions);
}

/* Whether text compared as text with a level agrees with the level collation: a level's name as
 * the column spells it, or text the collation reads as no level (not a name in another case, not
 * a number, which it reads as a severity). */
static int spelled_as_the_column_does(const char *text) {
    for (int level = 1; level <= 7; level++)
        if (strcmp(text, lb_q_level_name(level)) == 0) return 1;
    if (lb_query_level_from_name(text)) return 0;
    char *end;
    strtod(text, &end);
    return end == text || *end != '\0';
}

/* "k(2,-B,level)": the key fields and which of them use the level collation. */
static keyinfo parse_keyinfo(const char *p4) {
    keyinfo k = {0};
    if (!p4 || strncmp(p4, "k(", 2) != 0) return k;
    char *end;
    long fields = strtol(p4 + 2, &end, 10);
    if (end == p4 + 2 || fields < 0) return k;
    k.known = 1;
    k.key_fields = (int)fields;
    const char *p = end;
    for (int field = 0; field < fields && *p == ','; field++) {
        p++;
        if (*p == '-') p++;
        if (strncmp(p, "N.", 2) == 0) p += 2;
        if (is_level_collation(p) && field < FIELDS - 1) k.level_fields |= t_bit(field);
        p += strcspn(p, ",)");
    }
    return k;
}

static uint64_t key_mask(const keyinfo *k) { return k->key_fields >= FIELDS - 1 ? ALL_T : t_bit(k->key_fields) - 1; }

static int valid_cursor(const analysis *a, int cursor) { return cursor >= 0 && cursor < a->cursors; }
static int valid_register(const analysis *a, int reg) { return reg >= 0 && reg < a->registers; }

static int root_cursor(const analysis *a, int cursor) {
    for (int steps = 0; valid_cursor(a, cursor) && a->dup_of[cursor] != cursor && steps < a->cursors; steps++)
        cursor = a->dup_of[cursor];
    return cursor;
}

static uint64_t *state_of(analysis *a, int op) { return a->in + (size_t)(a->flow_insensitive ? 0 : op) * (size_t)a->registers; }

static uint64_t *out_state(analysis *a) {
    return a->in + (size_t)(a->flow_insensitive ? 1 : a->count) * (size_t)a->registers;
}

static uint64_t get(const analysis *a, const uint64_t *state, int reg) { return valid_register(a, reg) ? state[reg] : N; }

static void add_cursor_fields(analysis *a, int cursor, uint64_t fields) {
    cursor = root_cursor(a, cursor);
    if (!valid_cursor(a, cursor) || (a->cursor_fields[cursor] | fields) == a->cursor_fields[cursor]) return;
    a->cursor_fields[cursor] |= fields;
    a->cursors_changed = 1;
}

static uint64_t fields_of_cursor(const analysis *a, int cursor) {
    return valid_cursor(a, cursor) ? a->cursor_fields[root_cursor(a, cursor)] | a->cursor_fields[cursor] : ALL_N;
}

/* Writes what register `reg` holds after an instruction. */
static void set(analysis *a, uint64_t *state, int reg, uint64_t value) {
    if (!valid_register(a, reg)) return;
    state[reg] = a->flow_insensitive ? state[reg] | value : value;
}

/* What field `field` of cursor `cursor`'s row may hold: a pseudo cursor's row is the record in its
 * register now (OpenPseudo); any other's, what was ever written into it. */
static uint64_t column_of(const analysis *a, const uint64_t *state, int cursor, int field) {
    if (valid_cursor(a, cursor) && a->pseudo_register[cursor] >= 0)
        return field_of(get(a, state, a->pseudo_register[cursor]), field);
    return field_of(fields_of_cursor(a, cursor), field);
}

/* The bits of `count` registers from `first`, together. */
static uint64_t any_of(const analysis *a, const uint64_t *state, int first, int count) {
    uint64_t bits = 0;
    for (int i = 0; i < count; i++) bits |= get(a, state, first + i) & (T | N);
    return bits;
}

static int function_arguments(const instruction *op) {
    if (op->kind == K_AGG_STEP) return op->p5 > 0 ? op->p5 : 1;
    return op->arguments >= 0 ? op->arguments : VARIADIC_ARGUMENTS;
}

/* What instruction `i` does to the registers it writes (state is its in-state, made its out-state). */
static void transfer(analysis *a, int i, uint64_t *state) {
    const instruction *op = &a->ops[i];
    uint64_t bits = 0;
    switch (op->kind) {
    case K_NUMBER_P1: set(a, state, op->p1, N); break;
    case K_NUMBER_P2: set(a, state, op->p2, N); break;
    case K_NUMBER_P3: set(a, state, op->p3, N); break;
    /* EXPLAIN shows an empty string's P4 as NULL. */
    case K_STRING: set(a, state, op->p2, spelled_as_the_column_does(op->p4 ? op->p4 : "") ? 0 : N); break;
    case K_NULL:
        for (int r = op->p2 > 0 ? op->p2 : 0; r <= (op->p3 > op->p2 ? op->p3 : op->p2) && r < a->registers; r++)
            set(a, state, r, 0);
        break;
    case K_COPY:
        for (int k = 0; k <= op->p3 && op->p3 < a->registers; k++) set(a, state, op->p2 + k, get(a, state, op->p1 + k));
        break;
    case K_SCOPY: set(a, state, op->p2, get(a, state, op->p1)); break;
    case K_MOVE:
        for (int k = 0; k < op->p3 && op->p3 < a->registers; k++) {
            set(a, state, op->p2 + k, get(a, state, op->p1 + k));
            set(a, state, op->p1 + k, 0);
        }
        break;
    case K_COLUMN: set(a, state, op->p3, column_of(a, state, op->p1, op->p2)); break;
    case K_VCOLUMN:
        /* The level column holds names as lb_q_level_name spells them; any other, values not known. */
        set(a, state, op->p3,
            valid_cursor(a, op->p1) && a->records_cursor[op->p1] && op->p2 == LB_Q_LEVEL_COLUMN ? T : N);
        break;
    case K_FUNCTION:
        set(a, state, op->p3, is_passing(op->function) ? any_of(a, state, op->p2, function_arguments(op)) : N);
        break;
    case K_AGG_STEP:
        /* The accumulator keeps what it was given (a Null starts each group). */
        bits = is_passing(op->function) ? any_of(a, state, op->p2, function_arguments(op)) : N;
        set(a, state, op->p3, get(a, state, op->p3) | bits);
        break;
    case K_AGG_VALUE: set(a, state, op->p3, get(a, state, op->p1) & (T | N)); break;
    case K_MAKE_RECORD:
        for (int k = 0; k < op->p2 && k < a->registers; k++) bits |= as_field(get(a, state, op->p1 + k), k);
        set(a, state, op->p3, bits);
        break;
    case K_INSERT: add_cursor_fields(a, op->p1, get(a, state, op->p2)); break;
    case K_SORTER_DATA: case K_ROW_DATA: set(a, state, op->p2, fields_of_cursor(a, op->p1)); break;
    case K_GOSUB: case K_INIT_COROUTINE: case K_YIELD: set(a, state, op->p1, N); break;
    case K_COLLSEQ: if (op->p1) set(a, state, op->p1, N); break;
    case K_OTHER:
        /* Not known here: it may have written anything into P2 or P3. */
        set(a, state, op->p2, get(a, state, op->p2) | N);
        set(a, state, op->p3, get(a, state, op->p3) | N);
        break;
    default: break;
    }
}

/* Calls `visit` for each instruction control may reach after `i`. A subroutine's registers: after
 * a Gosub, those it never writes hold the caller's values (edge from the Gosub), the others what
 * its Return has (edge from the Return), so that its callers' values do not mix. */
static void successors(analysis *a, int i, void (*visit)(analysis *, int)) {
    const instruction *op = &a->ops[i];
    switch (op->kind) {
    case K_GOTO: visit(a, op->p2); return;
    case K_HALT: return;
    case K_JUMP: visit(a, op->p1); visit(a, op->p2); visit(a, op->p3); return;
    case K_GOSUB:
        visit(a, op->p2);
        if (a->subroutine_writes[i]) {
            a->edge_mask = a->subroutine_writes[i], a->edge_keep = 0;
            visit(a, i + 1);
            a->edge_mask = NULL;
        }
        return;
    case K_INIT_COROUTINE: visit(a, op->p2 ? op->p2 : i + 1); return;
    case K_RETURN:
        /* Back after any Gosub through the same register, or to an address an Integer put in it. */
        for (int j = 0; j < a->count; j++) {
            if (a->ops[j].kind == K_GOSUB && a->ops[j].p1 == op->p1) {
                a->edge_mask = a->subroutine_writes[j], a->edge_keep = 1;
                visit(a, j + 1);
                a->edge_mask = NULL;
            }
            if (a->ops[j].integer && a->ops[j].p2 == op->p1) visit(a, a->ops[j].p1 + 1);
        }
        if (op->p3) visit(a, i + 1);
        return;
    case K_YIELD:
        /* To the other side: the coroutine's entry, or after another Yield through the register
         * (its caller's, or the coroutine's own where it will resume). */
        for (int j = 0; j < a->count; j++) {
            if (a->ops[j].kind == K_INIT_COROUTINE && a->ops[j].p1 == op->p1) visit(a, a->ops[j].p3);
            if (a->ops[j].kind == K_YIELD && a->ops[j].p1 == op->p1 && j != i) visit(a, j + 1);
        }
        return;
    case K_END_COROUTINE:
        /* Back to the caller: to the P2 of the Yield that resumed the coroutine. */
        for (int j = 0; j < a->count; j++)
            if (a->ops[j].kind == K_YIELD && a->ops[j].p1 == op->p1) visit(a, a->ops[j].p2 ? a->ops[j].p2 : j + 1);
        return;
    case K_NOTHING: case K_NUMBER_P1: case K_NUMBER_P2: case K_NUMBER_P3: case K_STRING: case K_NULL: case K_COPY:
    case K_SCOPY: case K_MOVE: case K_COLUMN: case K_VCOLUMN: case K_FUNCTION: case K_AGG_STEP: case K_AGG_VALUE:
    case K_MAKE_RECORD: case K_INSERT: case K_ROW_DATA: case K_SORTER_DATA: case K_OPEN_PSEUDO: case K_OPEN_DUP:
    case K_OPEN_KEYED: case K_VOPEN: case K_COMPARE: case K_COLLSEQ:
        visit(a, i + 1);
        return;
    default:
        /* Any other may jump to P2 (a jump, or an opcode not known here): followed there too. */
        if (op->p2 > 0) visit(a, op->p2);
        visit(a, i + 1);
        return;
    }
}

/* Joins the out-state being made into the in-state of `to`, which runs (again) when that added
 * anything or it was never reached. */
static void flow(analysis *a, int to) {
    if (to < 0 || to >= a->count) return;
    const uint64_t *out = out_state(a);
    uint64_t *in = state_of(a, to);
    int changed = !a->reached[to];
    for (int r = 0; r < a->registers; r++) {
        uint64_t more = out[r] & ~in[r];
        if (!more || (a->edge_mask && ((a->edge_mask[r / 8] >> (r % 8)) & 1) != a->edge_keep)) continue;
        in[r] |= more;
        changed = 1;
    }
    a->reached[to] = 1;
    if (changed) a->pending[to] = 1;
}

/* The registers instruction `op` may write, into the bitset `bits`. */
static void mark_writes(const analysis *a, const instruction *op, uint8_t *bits) {
    int first = -1, last = -1, other = -1;
    switch (op->kind) {
    case K_NUMBER_P1: case K_GOSUB: case K_INIT_COROUTINE: case K_YIELD: case K_COLLSEQ: first = op->p1; break;
    case K_NUMBER_P2: case K_STRING: case K_SCOPY: case K_SORTER_DATA: case K_ROW_DATA: first = op->p2; break;
    case K_NUMBER_P3: case K_COLUMN: case K_VCOLUMN: case K_FUNCTION: case K_AGG_STEP: case K_AGG_VALUE:
    case K_MAKE_RECORD: first = op->p3; break;
    case K_NULL: first = op->p2, last = op->p3; break;
    case K_COPY: first = op->p2, last = op->p2 + op->p3; break;
    case K_MOVE: first = op->p2, last = op->p2 + op->p3 - 1; break;
    case K_OTHER: first = op->p2, other = op->p3; break;
    default: return;
    }
    if (op->kind == K_MOVE)
        for (int r = op->p1 > 0 ? op->p1 : 0; r < op->p1 + op->p3 && r < a->registers; r++)
            bits[r / 8] |= (uint8_t)(1 << (r % 8));
    if (last < first) last = first;
    for (int r = first > 0 ? first : 0; r <= last && r < a->registers; r++) bits[r / 8] |= (uint8_t)(1 << (r % 8));
    if (other >= 0 && other < a->registers) bits[other / 8] |= (uint8_t)(1 << (other % 8));
}

static void trace_visit(analysis *a, int to) {
    if (to < 0 || to >= a->count || a->seen[to]) return;
    a->seen[to] = 1;
    a->trace[a->traced++] = to;
}

/* The registers the subroutine a Gosub calls may write: every instruction reached from its
 * entry before a Return through its register (a nested Gosub's subroutine included). NULL when
 * there is no memory (its callers' values then mix, as with any jump). */
static uint8_t *trace_subroutine(analysis *a, int gosub) {
    uint8_t *bits = calloc((size_t)a->registers / 8 + 1, 1);
    if (!bits) return NULL;
    memset(a->seen, 0, (size_t)a->count);
    a->traced = 0;
    trace_visit(a, a->ops[gosub].p2);
    while (a->traced > 0) {
        int k = a->trace[--a->traced];
        const instruction *op = &a->ops[k];
        mark_writes(a, op, bits);
        if (op->kind == K_RETURN) {
            if (op->p1 != a->ops[gosub].p1 && op->p3) trace_visit(a, k + 1);
        } else if (op->kind == K_GOSUB) {
            trace_visit(a, op->p2);
            trace_visit(a, k + 1);
        } else {
            successors(a, k, trace_visit);
        }
    }
    return bits;
}

static int trace_subroutines(analysis *a) {
    a->subroutine_writes = calloc((size_t)a->count + 1, sizeof *a->subroutine_writes);
    a->trace = malloc(((size_t)a->count + 1) * sizeof *a->trace);
    a->seen = malloc((size_t)a->count + 1);
    if (!a->subroutine_writes || !a->trace || !a->seen) return -1;
    for (int i = 0; i < a->count; i++)
        if (a->ops[i].kind == K_GOSUB) a->subroutine_writes[i] = trace_subroutine(a, i);
    return 0;
}

/* Runs the flow until nothing changes: registers per instruction, cursors for the whole program
 * (a cursor that gains a field runs every reached instruction again). 0, or -1 when it would not
 * settle within its bound (the caller then follows one state for all instructions). */
static int run_flow(analysis *a) {
    /* At the start every register holds what is not known here. */
    for (int r = 0; r < a->registers; r++) state_of(a, 0)[r] = ALL_N;
    a->reached[0] = a->pending[0] = 1;
    for (long rounds = 0; rounds < 100000; rounds++) {
        int any = 0;
        for (int i = 0; i < a->count; i++) {
            if (!a->pending[i]) continue;
            any = 1;
            a->pending[i] = 0;
            memcpy(out_state(a), state_of(a, i), (size_t)a->registers * sizeof(uint64_t));
            transfer(a, i, out_state(a));
            for (int e = a->edge_first[i]; e < a->edge_first[i + 1]; e++) {
                a->edge_mask = a->edges[e].mask, a->edge_keep = a->edges[e].keep;
                flow(a, a->edges[e].to);
            }
            a->edge_mask = NULL;
        }
        if (a->cursors_changed) {
            /* A cursor holds more: what reads cursors runs again, and the flow carries it on. */
            a->cursors_changed = 0;
            for (int i = 0; i < a->count; i++) {
                enum kind k = a->ops[i].kind;
                if (a->reached[i] && (k == K_COLUMN || k == K_SORTER_DATA || k == K_ROW_DATA)) a->pending[i] = 1;
            }
            any = 1;
        }
        if (!any) return 0;
    }
    return -1;
}

static void add_edge(analysis *a, int to) {
    if (to < 0 || to >= a->count) return;
    if (a->edge_count == a->edge_capacity) {
        int capacity = a->edge_capacity ? 2 * a->edge_capacity : 2 * a->count + 16;
        struct edge *bigger = realloc(a->edges, (size_t)capacity * sizeof *bigger);
        if (!bigger) {
            a->edge_capacity = -1;   /* failed: said by build_edges */
            return;
        }
        a->edges = bigger;
        a->edge_capacity = capacity;
    }
    a->edges[a->edge_count++] = (struct edge){to, a->edge_mask, a->edge_keep};
}

/* Every instruction's successors, once (a Return's are found by a scan of the program). */
static int build_edges(analysis *a) {
    a->edge_first = malloc(((size_t)a->count + 1) * sizeof *a->edge_first);
    if (!a->edge_first) return -1;
    for (int i = 0; i < a->count && a->edge_capacity >= 0; i++) {
        a->edge_first[i] = a->edge_count;
        successors(a, i, add_edge);
    }
    a->edge_first[a->count] = a->edge_count;
    return a->edge_capacity >= 0 ? 0 : -1;
}

/* One state for every instruction, every instruction taken as reached and nothing ever cleared:
 * more than the flow says, never less. */
static void run_flow_insensitive(analysis *a) {
    uint64_t *all = state_of(a, 0);
    for (int r = 0; r < a->registers; r++) all[r] = ALL_N;
    for (int changed = 1, rounds = 0; changed && rounds < 100000; rounds++) {
        changed = 0;
        for (int i = 0; i < a->count; i++) {
            a->reached[i] = 1;
            memcpy(out_state(a), all, (size_t)a->registers * sizeof(uint64_t));
            transfer(a, i, out_state(a));
            for (int r = 0; r < a->registers; r++) {
                if ((all[r] | out_state(a)[r]) != all[r]) {
                    all[r] |= out_state(a)[r];
                    changed = 1;
                }
            }
        }
        if (a->cursors_changed) {
            a->cursors_changed = 0;
            changed = 1;
        }
    }
}

/* ---- the places checked ---- */

enum misuse { FINE, COMPARED, MIN_MAX, SORTED };

static int collated_by_level(const analysis *a, int i) {
    return i > 0 && a->ops[i - 1].kind == K_COLLSEQ && is_level_collation(a->ops[i - 1].p4);
}

static const keyinfo *keys_of(const analysis *a, int cursor) {
    if (!valid_cursor(a, cursor)) return NULL;
    const keyinfo *k = &a->keys[root_cursor(a, cursor)];
    return k->known ? k : NULL;
}

/* Key fields (bits of a record) that hold a level and compare as text, as T bits. */
static uint64_t levels_as_text(const keyinfo *k, uint64_t record) {
    return k ? record & key_mask(k) & ~k->level_fields : 0;
}

/* Whether an equality as text of key fields `keys` (T bits) may differ from the level collation:
 * one side of a field may be another spelling of a level. */
static int equality_differs(uint64_t keys, uint64_t one, uint64_t other) {
    return ((one | other) & (keys << FIELDS)) != 0;
}

/* A key of `count` registers from `first` (or, with count 0, the record in `first`) as a record. */
static uint64_t key_record(const analysis *a, const uint64_t *state, int first, int count) {
    if (count <= 0) return get(a, state, first);
    uint64_t record = 0;
    for (int j = 0; j < count && j < a->registers; j++) record |= as_field(get(a, state, first + j), j);
    return record;
}

static enum misuse misuse_at(const analysis *a, int i) {
    const instruction *op = &a->ops[i];
    const uint64_t *state = a->in + (size_t)(a->flow_insensitive ? 0 : i) * (size_t)a->registers;
    uint64_t left = get(a, state, op->p1), right = get(a, state, op->p3), record, text;
    switch (op->kind) {
    case K_ORDERING: return ((left | right) & T) && !is_level_collation(op->p4) ? COMPARED : FINE;
    case K_EQUALITY: return ((left | right) & T) && !is_level_collation(op->p4) && ((left | right) & N) ? COMPARED : FINE;
    case K_FUNCTION: case K_AGG_STEP: {
        uint64_t arguments = any_of(a, state, op->p2, function_arguments(op));
        if (!(arguments & T) || collated_by_level(a, i)) return FINE;
        if (strcasecmp(op->function, "min") == 0 || strcasecmp(op->function, "max") == 0) return MIN_MAX;
        return strcasecmp(op->function, "nullif") == 0 && (arguments & N) ? COMPARED : FINE;
    }
    case K_COMPARE: {
        keyinfo k = parse_keyinfo(op->p4);
        if (!k.known || (op->p5 & 1)) k = (keyinfo){.known = 1, .key_fields = op->p3};   /* permuted: any */
        record = key_record(a, state, op->p1, op->p3) | key_record(a, state, op->p2, op->p3);
        return levels_as_text(&k, record) ? SORTED : FINE;
    }
    case K_SEEK: case K_SORTER_COMPARE:
        record = key_record(a, state, op->p3, op->kind == K_SEEK && op->p4 ? atoi(op->p4) : 0);
        return levels_as_text(keys_of(a, op->p1), record) ? SORTED : FINE;
    case K_LOOKUP:
        record = key_record(a, state, op->p3, op->p4 ? atoi(op->p4) : 0);
        text = levels_as_text(keys_of(a, op->p1), record | fields_of_cursor(a, op->p1));
        return text && equality_differs(text, record, fields_of_cursor(a, op->p1)) ? COMPARED : FINE;
    default: return FINE;
    }
}

static const char *const misuse_sentences[] = {
    [COMPARED] = "compares a level as text: the severity order holds where SQLite compares the level column itself, "
                 "not what max(level), ifnull(level, ...), CASE or a subquery make of it ('critical' < 'error' as text); "
                 "compare severity instead (max(severity) >= 6), or add COLLATE level (worst >= 'error' COLLATE level)",
    [MIN_MAX] = "takes min() or max() of a level as text (of what ifnull(level, ...), CASE or another function made "
                "of it); use severity (max(severity)), or add COLLATE level inside (max(ifnull(level, 'trace') COLLATE level))",
    [SORTED] = "sorts, groups or looks up a level as text (ORDER BY, GROUP BY, DISTINCT, IN or a window over what "
               "max(level), ifnull(level, ...) or CASE made of it); use severity there, or add COLLATE level "
               "(ORDER BY max(level) COLLATE level)",
};

static enum misuse find_misuse(const analysis *a) {
    for (int i = 0; i < a->count; i++) {
        if (!a->reached[i]) continue;
        enum misuse m = misuse_at(a, i);
        if (m != FINE) return m;
    }
    /* What a keyed cursor holds: read in order, its order shows; only looked up, its equality. */
    for (int c = 0; c < a->cursors; c++) {
        uint64_t text = root_cursor(a, c) == c ? levels_as_text(keys_of(a, c), a->cursor_fields[c]) : 0;
        if (text && a->read_in_order[c]) return SORTED;
        if (text && equality_differs(text, a->cursor_fields[c], 0)) return SORTED;
    }
    return FINE;
}

/* ---- reading the program ---- */

static void classify(instruction *op, const char *name) {
    op->kind = K_OTHER;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        if (strcmp(name, kinds[i].name) == 0) {
            op->kind = kinds[i].kind;
            break;
        }
    }
    op->arguments = -1;
    op->integer = strcmp(name, "Integer") == 0;
    if ((op->kind == K_FUNCTION || op->kind == K_AGG_STEP || op->kind == K_AGG_VALUE) && op->p4) {
        /* P4 shows the function as "max(-1)": its name and declared argument count. */
        size_t length = strcspn(op->p4, "(");
        if (length < sizeof op->function) {
            memcpy(op->function, op->p4, length);
            op->function[length] = '\0';
            if (op->p4[length] == '(') op->arguments = atoi(op->p4 + length + 1);
        }
    }
}

static void free_program(analysis *a) {
    for (int i = 0; i < a->count; i++) free(a->ops[i].p4);
    free(a->ops);
    a->ops = NULL;
    a->count = 0;
}

/* The statement's program, from EXPLAIN: 0, or an SQLite result code. */
static int read_program(analysis *a, const char *sql) {
    char *explain = sqlite3_mprintf("EXPLAIN %s", sql);
    if (!explain) return SQLITE_NOMEM;
    sqlite3_stmt *statement = NULL;
    int rc = sqlite3_prepare_v2(a->query->db, explain, -1, &statement, NULL);
    sqlite3_free(explain);
    int capacity = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(statement)) == SQLITE_ROW) {
        if (a->count == capacity) {
            capacity = capacity ? 2 * capacity : 256;
            instruction *bigger = realloc(a->ops, (size_t)capacity * sizeof *bigger);
            if (!bigger) {
                rc = SQLITE_NOMEM;
                break;
            }
            a->ops = bigger;
        }
        instruction *op = &a->ops[a->count++];
        *op = (instruction){.p1 = sqlite3_column_int(statement, 2), .p2 = sqlite3_column_int(statement, 3),
                            .p3 = sqlite3_column_int(statement, 4), .p5 = sqlite3_column_int(statement, 6)};
        const char *p4 = (const char *)sqlite3_column_text(statement, 5);
        if (p4 && !(op->p4 = strdup(p4))) {
            rc = SQLITE_NOMEM;
            break;
        }
        const char *name = (const char *)sqlite3_column_text(statement, 1);
        classify(op, name ? name : "");
        rc = SQLITE_OK;
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    sqlite3_finalize(statement);
    return rc;
}

/* The highest register instruction `op` may read or write (-1 for none). */
static int highest_register(const instruction *op) {
    int count = (op->kind == K_LOOKUP || op->kind == K_SEEK) && op->p4 ? atoi(op->p4) : 0;
    int candidates[4] = {-1, -1, -1, -1};
    switch (op->kind) {
    case K_NUMBER_P1: case K_GOSUB: case K_RETURN: case K_INIT_COROUTINE: case K_YIELD: case K_END_COROUTINE:
    case K_COLLSEQ: candidates[0] = op->p1; break;
    case K_NUMBER_P2: case K_STRING: case K_SORTER_DATA: case K_ROW_DATA: case K_OPEN_PSEUDO: candidates[0] = op->p2; break;
    case K_INSERT: candidates[0] = op->p2, candidates[1] = op->p3; break;
    case K_COLUMN: case K_VCOLUMN: case K_SORTER_COMPARE: candidates[0] = op->p3; break;
    case K_NULL: candidates[0] = op->p2, candidates[1] = op->p3; break;
    case K_COPY: candidates[0] = op->p1 + op->p3, candidates[1] = op->p2 + op->p3; break;
    case K_MOVE: case K_COMPARE: candidates[0] = op->p1 + op->p3 - 1, candidates[1] = op->p2 + op->p3 - 1; break;
    case K_FUNCTION: candidates[0] = op->p2 + VARIADIC_ARGUMENTS, candidates[1] = op->p3; break;
    case K_AGG_STEP: candidates[0] = op->p2 + op->p5, candidates[1] = op->p3; break;
    case K_AGG_VALUE: case K_ORDERING: case K_EQUALITY: candidates[0] = op->p1, candidates[1] = op->p3; break;
    case K_MAKE_RECORD: candidates[0] = op->p1 + op->p2 - 1, candidates[1] = op->p3; break;
    case K_LOOKUP: case K_SEEK: candidates[0] = op->p3 + count; break;
    case K_NOTHING: candidates[0] = op->p1 + op->p2, candidates[1] = op->p3; break;   /* Affinity, ResultRow: ranges */
    case K_SCOPY: case K_NUMBER_P3: case K_OTHER: candidates[0] = op->p1, candidates[1] = op->p2, candidates[2] = op->p3; break;
    default: candidates[0] = op->p1, candidates[1] = op->p3; break;   /* jumps: P2 is an address */
    }
    int highest = -1;
    for (int i = 0; i < 4; i++)
        if (candidates[i] > highest && candidates[i] < (1 << 24)) highest = candidates[i];
    return highest;
}

/* The registers and cursors the program names (as bounds for the arrays). */
static void measure(analysis *a) {
    int registers = 0, cursors = 0;
    for (int i = 0; i < a->count; i++) {
        const instruction *op = &a->ops[i];
        int reg = highest_register(op);
        if (reg + 1 > registers) registers = reg + 1;
        int cursor = -1;
        switch (op->kind) {
        case K_COLUMN: case K_VCOLUMN: case K_INSERT: case K_ROW_DATA: case K_OPEN_PSEUDO: case K_OPEN_KEYED:
        case K_VOPEN: case K_LOOKUP: case K_SEEK: case K_SORTER_COMPARE: case K_ITERATE: cursor = op->p1; break;
        case K_SORTER_DATA: cursor = op->p1 > op->p3 ? op->p1 : op->p3; break;
        case K_OPEN_DUP: cursor = op->p1 > op->p2 ? op->p1 : op->p2; break;
        default: break;
        }
        if (cursor + 1 > cursors && cursor < (1 << 20)) cursors = cursor + 1;
    }
    a->registers = registers;
    a->cursors = cursors;
}

static int is_records_table(const lb_query *q, const char *p4) {
    /* P4 of VOpen shows the table as "vtab:%p". */
    if (!p4 || strncmp(p4, "vtab:", 5) != 0) return 1;   /* cannot tell: taken as one */
    uintptr_t table = (uintptr_t)strtoull(p4 + 5, NULL, 16);
    return table == (uintptr_t)q->records_tables[0] || table == (uintptr_t)q->records_tables[1];
}

static int set_up_cursors(analysis *a) {
    size_t n = a->cursors > 0 ? (size_t)a->cursors : 1;
    a->cursor_fields = calloc(n, sizeof *a->cursor_fields);
    a->pseudo_register = malloc(n * sizeof *a->pseudo_register);
    a->records_cursor = calloc(n, sizeof *a->records_cursor);
    a->dup_of = malloc(n * sizeof *a->dup_of);
    a->keys = calloc(n, sizeof *a->keys);
    a->read_in_order = calloc(n, 1);
    if (!a->cursor_fields || !a->pseudo_register || !a->records_cursor || !a->dup_of || !a->keys || !a->read_in_order)
        return -1;
    for (int c = 0; c < a->cursors; c++) {
        a->pseudo_register[c] = -1;
        a->dup_of[c] = c;
    }
    for (int i = 0; i < a->count; i++) {
        const instruction *op = &a->ops[i];
        if (!valid_cursor(a, op->p1)) continue;
        switch (op->kind) {
        case K_OPEN_PSEUDO: a->pseudo_register[op->p1] = op->p2; break;
        case K_OPEN_DUP: if (valid_cursor(a, op->p2)) a->dup_of[op->p1] = op->p2; break;
        case K_OPEN_KEYED: a->keys[op->p1] = parse_keyinfo(op->p4); break;
        case K_VOPEN: a->records_cursor[op->p1] = is_records_table(a->query, op->p4); break;
        default: break;
        }
    }
    for (int i = 0; i < a->count; i++)
        if ((a->ops[i].kind == K_ITERATE || a->ops[i].kind == K_SEEK) && valid_cursor(a, a->ops[i].p1))
            a->read_in_order[root_cursor(a, a->ops[i].p1)] = 1;
    return 0;
}

static void free_analysis(analysis *a) {
    for (int i = 0; a->subroutine_writes && i < a->count; i++) free(a->subroutine_writes[i]);
    free_program(a);
    free(a->in);
    free(a->reached);
    free(a->pending);
    free(a->cursor_fields);
    free(a->pseudo_register);
    free(a->records_cursor);
    free(a->dup_of);
    free(a->keys);
    free(a->read_in_order);
    free(a->subroutine_writes);
    free(a->trace);
    free(a->seen);
    free(a->edges);
    free(a->edge_first);
}

int lb_query_check_levels(lb_query *q, const char *sql) {
    lb_error_detail_clear();
    analysis a = {.query = q};
    int rc = read_program(&a, sql);
    if (rc != SQLITE_OK) {
        lb_error_detail_set("the statement's program could not be read: %s", sqlite3_errmsg(q->db));
        free_analysis(&a);
        return rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
    }
    measure(&a);
    /* Per instruction while that stays under 8 MiB; one state for all beyond. */
    size_t rows = (size_t)a.count + 1, registers = a.registers > 0 ? (size_t)a.registers : 1;
    a.flow_insensitive = rows * registers > ((size_t)1 << 20);
    if (a.flow_insensitive) rows = 2;
    a.in = calloc(rows * registers, sizeof *a.in);
    a.reached = calloc(a.count + 1, 1);
    a.pending = calloc(a.count + 1, 1);
    if (!a.in || !a.reached || !a.pending || set_up_cursors(&a) != 0 || trace_subroutines(&a) != 0 ||
        build_edges(&a) != 0) {
        free_analysis(&a);
        return -ENOMEM;
    }
    if (a.flow_insensitive || run_flow(&a) != 0) {
        a.flow_insensitive = 1;
        memset(a.in, 0, 2 * registers * sizeof *a.in);
        run_flow_insensitive(&a);
    }
    enum misuse misuse = find_misuse(&a);
    free_analysis(&a);
    if (misuse == FINE) return 0;
    lb_error_detail_set("this statement %s", misuse_sentences[misuse]);
    return -ENOTSUP;
}
