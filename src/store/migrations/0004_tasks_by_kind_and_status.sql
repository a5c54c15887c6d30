-- LMSP 15: the lmsp_tasks gauge counts stored tasks by kind and status at every scrape. Without an
-- index that is a scan of the whole table into a temporary b-tree (85 to 450 ms for 100,000 tasks
-- on a loaded 2-core machine, blocking requests meanwhile); with this covering index it is a walk
-- of small index entries (15 to 40 ms on the same machine, same moment).
CREATE INDEX tasks_by_kind_and_status ON tasks (kind, status);
