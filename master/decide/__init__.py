"""decide: what each slave is sent of a unit. The flag words (one bit per slave, per table and per
lone statement: WL#2387's FILTER_BINLOG_SEND_F) and each slave's decider (flags), the answers for
the units that are not fast (statement_answers), the master policy's bound on statement texts
(policy_check), the rule hits a decision counts (rule_hits), and what a stream started by GTID
skips (gtid_skip). Nothing here reads a file or sends a byte."""
