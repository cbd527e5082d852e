"""Runs, tasks, trials and events in the database: typed outcomes (:mod:`.outcomes`), the
writes the runner and the coordinator share (:mod:`.records`), and the run read model every
view shows (:mod:`.summary`)."""
