/* The process-wide handle table.
 *
 * A handle is (generation << 32) | (slot index + 1). A slot owns one memory reference of its
 * operation until the handle is released; then its generation moves on, so a stale handle (released
 * twice, or never issued) is rejected deterministically and never reaches freed memory.
 *
 * A (slot, generation) pair is never issued twice: a slot whose generation reached 0xFFFFFFFF is
 * retired when that handle is released, instead of wrapping back to 1 (after 2^32 - 1 reuses of a
 * LIFO free list, a wrap would let a stale handle name a new, live operation). Retiring costs one
 * slot (16 bytes) per 4 billion handles. The table only grows; it is reachable from a static
 * pointer for the whole process lifetime. */
#include "lsdk_internal.h"

typedef struct lsdk_slot {
    uint32_t generation;  /* never 0 */
    uint32_t next_free;   /* free-list link: index + 1, 0 = end */
    struct lsdk_op *op;   /* NULL when free */
} lsdk_slot_t;

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t table_mutex;
static lsdk_slot_t *slots;
static uint32_t slot_count;
static uint32_t slot_capacity;
static uint32_t free_head; /* index + 1 */
static uint64_t retired_slots;

static void table_init(void) { lsdk_mutex_init(&table_mutex); }

static lsdk_slot_t *slot_for(lsdk_handle_t handle) {
    uint32_t index_plus_one = (uint32_t)(handle & 0xFFFFFFFFu);
    uint32_t generation = (uint32_t)(handle >> 32);
    if (index_plus_one == 0 || index_plus_one > slot_count) return NULL;
    lsdk_slot_t *slot = &slots[index_plus_one - 1];
    if (slot->op == NULL || slot->generation != generation) return NULL;
    return slot;
}

lsdk_status_t lsdk_handle_create(struct lsdk_op *op, lsdk_handle_t *out_handle) {
    pthread_once(&table_once, table_init);
    lsdk_lock(&table_mutex);
    uint32_t index;
    if (free_head != 0) {
        index = free_head - 1;
        free_head = slots[index].next_free;
    } else {
        if (slot_count == slot_capacity) {
            uint32_t capacity = slot_capacity == 0 ? 256 : slot_capacity * 2;
            if (capacity <= slot_capacity || capacity > 0x7FFFFFFFu) {
                lsdk_unlock(&table_mutex);
                return LSDK_ERR_RESOURCES;
            }
            lsdk_slot_t *grown = realloc(slots, (size_t)capacity * sizeof *grown);
            if (grown == NULL) {
                lsdk_unlock(&table_mutex);
                return LSDK_ERR_RESOURCES;
            }
            slots = grown;
            slot_capacity = capacity;
        }
        index = slot_count++;
        slots[index].generation = 1;
    }
    lsdk_slot_t *slot = &slots[index];
    slot->next_free = 0;
    /* Counted before the slot names the operation (and under the mutex every lookup takes), so
       whoever releases this handle counts handles_released after this count. */
    lsdk_count(lsdk_op_client(op), LSDK_COUNTER_handles_created, 1);
    slot->op = op;
    lsdk_op_ref(op);
    *out_handle = ((lsdk_handle_t)slot->generation << 32) | (lsdk_handle_t)(index + 1);
    lsdk_unlock(&table_mutex);
    return LSDK_OK;
}

struct lsdk_op *lsdk_handle_acquire(lsdk_handle_t handle) {
    if (handle == LSDK_INVALID_HANDLE) return NULL;
    pthread_once(&table_once, table_init);
    lsdk_lock(&table_mutex);
    lsdk_slot_t *slot = slot_for(handle);
    struct lsdk_op *op = slot != NULL ? slot->op : NULL;
    if (op != NULL) lsdk_op_ref(op);
    lsdk_unlock(&table_mutex);
    return op;
}

struct lsdk_op *lsdk_handle_remove(lsdk_handle_t handle) {
    if (handle == LSDK_INVALID_HANDLE) return NULL;
    pthread_once(&table_once, table_init);
    lsdk_lock(&table_mutex);
    lsdk_slot_t *slot = slot_for(handle);
    struct lsdk_op *op = NULL;
    if (slot != NULL) {
        op = slot->op;
        slot->op = NULL;
        if (slot->generation == 0xFFFFFFFFu) {
            /* Retired: op stays NULL, so every handle of this slot is rejected from now on. */
            retired_slots++;
        } else {
            slot->generation++;
            uint32_t index = (uint32_t)(slot - slots);
            slot->next_free = free_head;
            free_head = index + 1;
        }
    }
    lsdk_unlock(&table_mutex);
    return op;
}

lsdk_status_t lsdk_test_handle_set_generation(lsdk_handle_t handle, uint32_t generation,
                                              lsdk_handle_t *out_handle) {
    if (out_handle == NULL) return LSDK_ERR_NULL_ARGUMENT;
    if (generation == 0) return LSDK_ERR_OUT_OF_RANGE;
    if (handle == LSDK_INVALID_HANDLE) return LSDK_ERR_INVALID_HANDLE;
    pthread_once(&table_once, table_init);
    lsdk_lock(&table_mutex);
    lsdk_slot_t *slot = slot_for(handle);
    if (slot == NULL) {
        lsdk_unlock(&table_mutex);
        return LSDK_ERR_INVALID_HANDLE;
    }
    slot->generation = generation;
    *out_handle = ((lsdk_handle_t)generation << 32) | (handle & 0xFFFFFFFFu);
    lsdk_unlock(&table_mutex);
    return LSDK_OK;
}

uint64_t lsdk_test_handle_slots_retired(void) {
    pthread_once(&table_once, table_init);
    lsdk_lock(&table_mutex);
    uint64_t retired = retired_slots;
    lsdk_unlock(&table_mutex);
    return retired;
}
