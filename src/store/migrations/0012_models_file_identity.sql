-- LMSP 5, integrity before loading: besides size and modification time (which anyone who may
-- write the file can set back with `touch`), the file's device, inode and change time as they
-- were when it was hashed. A change time cannot be set back, and a file put in place of another
-- has a new inode: either is a change, and the file is hashed again before it loads. Rows from
-- before this column have none, so each such file is hashed once more at its next load.
ALTER TABLE models ADD COLUMN file_identity TEXT;
