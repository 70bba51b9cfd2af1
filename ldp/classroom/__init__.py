"""The classroom: students' own machines are the users, the teacher's screen shows the protocol live.

``ldp-sim classroom`` (the teacher: ``ldp.classroom.teacher``) runs an aggregator with enrolment
(TLS + a shared token, ``ldp.wire.tls``), a live web dashboard (``ldp.classroom.dashboard``) and
scripted lessons (``ldp.classroom.lessons``); ``ldp-sim join`` (a student:
``ldp.classroom.student``) is one ordinary client process (``ldp.wire.client``) that hosts one
seat of the class: the student's own answers, typed on their machine, and the MASKED-PARITY
records the tool generates there. See docs/classroom.md.
"""
