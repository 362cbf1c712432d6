# The compiled twin of pyorb.client.calls.RequestWriter (_cwriter.pyx): the same constructor, methods and fields.
from pyorb.client.calls import _PythonRequestWriter

class RequestWriter(_PythonRequestWriter): ...
