"""leasekv: a small Raft-replicated store that serves reads from a leader lease.

Built the way elastickv's lease read works (lease = election timeout - safety margin,
extended from the time taken before each successful quorum round, invalidated when
leadership is lost), with switches that inject the bugs elastickv's reviewers found.
See README.md in this folder.
"""
