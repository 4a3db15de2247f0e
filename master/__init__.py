"""The master's dump service (WL#2387 parts 1 and 2): registrations, filtered streams, policy."""
