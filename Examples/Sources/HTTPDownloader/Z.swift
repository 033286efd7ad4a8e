import CCurl
public enum Z {}
