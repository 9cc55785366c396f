package io.anserini.collection;

import java.io.BufferedReader;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import java.text.ParseException;
import java.util.Iterator;
import java.util.NoSuchElementException;

/** Compile-time stand-in for Anserini's class (its classes need javac 21); the real one is used at run time. */
public abstract class FileSegment<T extends SourceDocument> implements Iterable<T>, Closeable {
  protected Path path;
  protected BufferedReader bufferedReader;
  protected boolean atEOF;
  protected T bufferedRecord;

  public FileSegment(Path path) {
    this.path = path;
  }

  protected abstract void readNext() throws IOException, ParseException, NoSuchElementException;

  @Override
  public final Iterator<T> iterator() {
    throw new UnsupportedOperationException();
  }

  @Override
  public void close() {}
}
